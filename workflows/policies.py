"""Activity timeouts and retry policies of every workflow, in one place, each with why it is so.
Workflows call activities by name (contracts/) with one of these; none defines its own.

Every retry policy is built by `retry` below: it has a maximum number of attempts, and data errors
(contracts/data_errors.py) are never retried, whatever the activity. tests/workflows/test_retry_bounds.py
walks every policy and every activity call of every workflow to keep it so. Where an outage of Postgres,
a gateway or a cluster should be waited out, the maximum is generous (an hour or more), never infinite:
a workflow that meets it fails with the last error as its reason instead of growing its history for days.

Local activities run inside the workflow task on the worker that holds the workflow, with no round
trip through the server to dispatch them or to report back (on the dev server each such trip is tens
of milliseconds); the result is still recorded (a marker), retried and idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from contracts.artifact import HUB_FINAL, HUB_MISSING
from contracts.data_errors import DATA_ERRORS
from contracts.perf import ERROR_NOT_INSTALLED
from contracts.rollout import FINAL_ERRORS


def retry(*, attempts: int, initial: timedelta = timedelta(seconds=1), maximum_interval: timedelta | None = None,
          final: Sequence[str] = ()) -> RetryPolicy:
    """A retry policy with a maximum: `attempts` in all (the first included); `final` and every data error
    end it at once."""
    if attempts < 1:
        raise ValueError("a retry policy needs a maximum number of attempts")
    return RetryPolicy(initial_interval=initial, maximum_interval=maximum_interval, maximum_attempts=attempts,
                       non_retryable_error_types=[*final, *DATA_ERRORS])


# Registry writes take milliseconds: a worker that dies mid-write is written off after 10 s, and while
# Postgres restarts they retry every few seconds (at most 5 s apart), not every half minute, for up to an
# hour (720 attempts): a restart or a failover is waited out, a database gone for good fails the step.
REGISTRY_TIMEOUT = timedelta(seconds=10)
REGISTRY_RETRY = retry(attempts=720, maximum_interval=timedelta(seconds=5))
REGISTRY = workflow.LocalActivityConfig(start_to_close_timeout=REGISTRY_TIMEOUT, retry_policy=REGISTRY_RETRY)
# The same writes as scheduled (server-dispatched) activities, where a recorded history has them so:
# making them local changes the command sequence, so it waits for a re-recording of histories.
REGISTRY_SCHEDULED = workflow.ActivityConfig(start_to_close_timeout=REGISTRY_TIMEOUT, retry_policy=REGISTRY_RETRY)

# Placement is a pure computation over inventories the workflow already read: local, like the registry
# writes. It fails only on a bug, which a few tries do not fix: the workflow fails with the bug's words.
PLACE = workflow.LocalActivityConfig(start_to_close_timeout=timedelta(seconds=10), retry_policy=retry(attempts=3))


def inventory_read(task_queue: str) -> workflow.ActivityConfig:
    """A cluster's nodes and GPUs, read on the kube task queue: a few quick tries; a cluster that stays
    unreadable takes no replicas this time (the caller turns the error into an empty inventory)."""
    return workflow.ActivityConfig(task_queue=task_queue, start_to_close_timeout=timedelta(seconds=15),
                                   retry_policy=retry(attempts=5))


# An observation is started again on another worker when its heartbeats stop for `watch.silence_seconds`
# (at least 6 s), the period after which the plane says it has not heard from a cluster: a look lost with
# its worker (killed, OOM) costs the workflow at most that, and the new attempt carries on. It used to
# be 6 s for every look, so every waiting look heartbeated every 4.8 s: at 1,000 watched workloads
# those heartbeats were most of the Temporal server's work (bench/watching.py; bench/RESULTS.md). A
# worker that shuts down fails its looks at once (activities/observe.py), so they start again elsewhere
# without waiting for this.
# Only one still unanswered `watch.silence_seconds` past its report period (no observe worker, a hung
# API) is given up. Within that window a look is tried again every few seconds: the attempts cover the
# window at the policy's longest interval, so the window, not the count, is what ends it.
OBSERVE_HEARTBEAT_TIMEOUT_MIN = timedelta(seconds=6)
OBSERVE_RETRY_INTERVAL = timedelta(seconds=5)


def observe(task_queue: str, report_seconds: float, silence_seconds: float) -> workflow.ActivityConfig:
    window = report_seconds + silence_seconds
    attempts = int(window / OBSERVE_RETRY_INTERVAL.total_seconds()) + 4
    return workflow.ActivityConfig(
        task_queue=task_queue, schedule_to_close_timeout=timedelta(seconds=window),
        heartbeat_timeout=max(OBSERVE_HEARTBEAT_TIMEOUT_MIN, timedelta(seconds=silence_seconds)),
        retry_policy=retry(attempts=attempts, maximum_interval=OBSERVE_RETRY_INTERVAL))


# A person waits on an upgrade's plan (the update's answer): a registry that stays down refuses, it does
# not hang.
UPGRADE_PLAN = workflow.ActivityConfig(start_to_close_timeout=timedelta(seconds=30), retry_policy=retry(attempts=3))
# The gateway's counters for one upgrade window: a gateway that cannot be read pauses the upgrade for a
# person rather than retrying forever.
GATEWAY_COUNTERS = workflow.ActivityConfig(start_to_close_timeout=timedelta(seconds=15),
                                           retry_policy=retry(attempts=3))


# --- the artifact workflow ----------------------------------------------------------------------------

# Resolving a commit asks the Hub: retried with backoff for about ten minutes (the resolver itself tries
# each call three times), except answers no retry changes (missing, gated, no token, not a model, a config
# outside the schema).
HUB_RESOLVE = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=retry(attempts=12, maximum_interval=timedelta(minutes=1), final=HUB_FINAL))
# The evidence and sizing steps over the shipped catalog (sizing may resolve another checkpoint on the
# Hub): local, a few tries. A config the sizing cannot read is drafted as not sized, not retried (it was a
# retry without end: issue 46).
DRAFT_COMPUTE = workflow.LocalActivityConfig(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=retry(attempts=5, maximum_interval=timedelta(minutes=1), final=HUB_FINAL))
# Telling the followers sends updates through the Temporal client: retried while Temporal does not
# answer, a bounded number of times (a refusal is an answer, recorded and not retried).
FOLLOW = workflow.ActivityConfig(
    summary="follow: upgrade the branch's follow: auto workloads, tell the manual ones",
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=retry(attempts=10, initial=timedelta(seconds=2), maximum_interval=timedelta(minutes=1)))



# Before the draft: a registered cluster's nodes, read on the kube queue. Bounded from scheduling on, so a
# plane whose kube worker is down delays a draft by seconds, not for ever; unread clusters add no card.
def fleet_inventory_read(task_queue: str) -> workflow.ActivityConfig:
    return workflow.ActivityConfig(task_queue=task_queue, schedule_to_close_timeout=timedelta(seconds=20),
                                   retry_policy=retry(attempts=2))


# --- the perf queue (a draft's performance, a workload's traffic plan) ----------------------------------

# A cold search holds the CPU for tens of seconds to minutes, and searches take turns on the perf worker:
# generous for one, but bounded. Its ticker heartbeats every 5 s, so a dead worker is noticed within the
# heartbeat timeout. A perf worker without AIConfigurator answers that at once, and no retry changes it.
PERF_ONE_SEARCH = timedelta(hours=2)
PERF_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
PERF_RETRY = retry(attempts=3, final=[ERROR_NOT_INSTALLED])
# How long a draft's estimates stay queued for a perf worker that is not there: two review deadlines.
WAIT_FOR_A_PERF_WORKER = timedelta(days=14)
# While a perf worker polls, an ask it has not taken within this long finds it gone or busy: the draft says which.
PERF_TAKEN_WITHIN = timedelta(minutes=5)


def perf_search(task_queue: str) -> workflow.ActivityConfig:
    """One search that a caller waits for (a traffic plan): bounded from scheduling on."""
    return workflow.ActivityConfig(task_queue=task_queue, schedule_to_close_timeout=PERF_ONE_SEARCH,
                                   heartbeat_timeout=PERF_HEARTBEAT_TIMEOUT, retry_policy=PERF_RETRY)


def draft_estimate(task_queue: str, *, queued: bool) -> workflow.ActivityConfig:
    """A draft's ask: `queued` waits on the queue for a perf worker (bounded); otherwise one that polls is
    expected to take it within minutes, and a schedule-to-start timeout says it did not."""
    config = workflow.ActivityConfig(task_queue=task_queue, start_to_close_timeout=PERF_ONE_SEARCH,
                                     heartbeat_timeout=PERF_HEARTBEAT_TIMEOUT, retry_policy=PERF_RETRY)
    if queued:
        config["schedule_to_close_timeout"] = WAIT_FOR_A_PERF_WORKER + PERF_ONE_SEARCH
    else:
        config["schedule_to_start_timeout"] = PERF_TAKEN_WITHIN
    return config


# Whether any perf worker polls its queue: one question to Temporal, retried a few times.
PERF_POLLED = workflow.ActivityConfig(start_to_close_timeout=timedelta(seconds=30), retry_policy=retry(attempts=5))

# --- the watch ------------------------------------------------------------------------------------------

# A watch run asks the Hub where a branch points: a Hub that stays down skips this run (the schedule
# runs it again), a repository gone or gated ends it at once.
WATCH_CHECK = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=retry(attempts=10, initial=timedelta(seconds=5), maximum_interval=timedelta(minutes=5),
                       final=HUB_MISSING))
# The notice's webhook: a few tries; the draft is open whether or not anyone heard.
WATCH_NOTIFY = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=retry(attempts=5, initial=timedelta(seconds=5)))

# --- the cluster rollout --------------------------------------------------------------------------------

# A cluster that keeps failing a call for about half an hour (60 attempts, 30 s apart at most) fails the
# rollout step with its last error; the workload says so and the watch tries again on its next look.
KUBE_RETRY = retry(attempts=60, maximum_interval=timedelta(seconds=30), final=FINAL_ERRORS)
# A worker that dies mid-activity is noticed when its heartbeats stop: long waits heartbeat every
# poll (2 s by default), so a short timeout lets another worker take over within seconds. 15 s made
# each worker crash cost a rollout (so a scale or a heal) 15 s plus the retry's backoff (chaos run).
KUBE_HEARTBEAT_TIMEOUT = timedelta(seconds=8)


def _kube(task_queue: str, timeout: timedelta, *, heartbeat: bool) -> workflow.ActivityConfig:
    """Kubernetes calls: on the kube task queue, retried unless final; long waits heartbeat."""
    config = workflow.ActivityConfig(task_queue=task_queue, retry_policy=KUBE_RETRY, start_to_close_timeout=timeout)
    if heartbeat:
        config["heartbeat_timeout"] = KUBE_HEARTBEAT_TIMEOUT
    return config


def rollout_apply(task_queue: str) -> workflow.ActivityConfig:
    """One server-side apply (and the adapter's few retries): seconds. It does not heartbeat, so this is
    how long a killed worker holds it; the apply is idempotent and retried."""
    return _kube(task_queue, timedelta(seconds=20), heartbeat=False)


def rollout_wait_ready(task_queue: str) -> workflow.ActivityConfig:
    """The activity keeps its own deadline (scaled by weight bytes, hours for the largest models); this
    only bounds a wait whose deadline is broken."""
    return _kube(task_queue, timedelta(hours=7), heartbeat=True)


def rollout_probe(task_queue: str) -> workflow.ActivityConfig:
    """The frontend probe gives up after 10 minutes by itself."""
    return _kube(task_queue, timedelta(minutes=12), heartbeat=True)


def rollout_delete(task_queue: str) -> workflow.ActivityConfig:
    """A delete waits until the DGD is gone (the operator's finalizers may take a while)."""
    return _kube(task_queue, timedelta(minutes=20), heartbeat=True)


# --- the live inventory --------------------------------------------------------------------------------


def cluster_check(task_queue: str, check_seconds: float) -> workflow.ActivityConfig:
    """A person waits on a preflight: the checks stop starting after `check_seconds`, each call has a few
    seconds more; one try more if the worker died under it (a failing check is an answer, not an error)."""
    return workflow.ActivityConfig(task_queue=task_queue, start_to_close_timeout=timedelta(seconds=check_seconds + 15),
                                   retry_policy=retry(attempts=2, initial=timedelta(milliseconds=200)))


def live_inventory_read(task_queue: str, timeout_seconds: float) -> workflow.ActivityConfig:
    """A person waits on a dry run: two quick tries, then the cluster is explained as unreadable."""
    return workflow.ActivityConfig(task_queue=task_queue, start_to_close_timeout=timedelta(seconds=timeout_seconds),
                                   retry_policy=retry(attempts=2, initial=timedelta(milliseconds=200)))


# --- the endpoint --------------------------------------------------------------------------------------

# Each call is a database read, a few probes or one gateway call: short, so a worker that dies
# mid-call is written off in seconds and the next pass runs elsewhere (60 s held routes stale). An endpoint
# lives for months: a gateway or database outage is waited out for about three hours (360 attempts).
ENDPOINT_IO = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=20),
    retry_policy=retry(attempts=360, maximum_interval=timedelta(seconds=30)))
# A person waits on the membership check: a registry that stays down fails the update, not the endpoint.
MEMBERSHIP_CHECK = workflow.ActivityConfig(start_to_close_timeout=timedelta(seconds=10),
                                           retry_policy=retry(attempts=3))


def drain_wait(grace_seconds: float) -> workflow.ActivityConfig:
    """Waiting for in-flight requests lasts at most the grace period; it heartbeats while it waits."""
    return workflow.ActivityConfig(start_to_close_timeout=timedelta(seconds=grace_seconds + 60),
                                   heartbeat_timeout=timedelta(seconds=10), retry_policy=retry(attempts=3))


# --- the ping ----------------------------------------------------------------------------------------------

PING = workflow.ActivityConfig(start_to_close_timeout=timedelta(seconds=30), retry_policy=retry(attempts=3))


# --- the autoscaler ----------------------------------------------------------------------------------

# Reading a workload's measurements and deciding is a few queries: a Postgres restart is waited out for minutes,
# then the tick is skipped (the loop goes on with the next period).
AUTOSCALER_DECIDE = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=20),
    retry_policy=retry(attempts=30, maximum_interval=timedelta(seconds=10)))
# Claiming the quota and sending the workload its scale update (answered once accepted): retried while
# Temporal or Postgres do not answer, a bounded number of times; a refusal (quota, the workload busy) is an
# answer, recorded and not retried.
AUTOSCALER_SCALE = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=retry(attempts=10, initial=timedelta(seconds=2), maximum_interval=timedelta(seconds=30)))

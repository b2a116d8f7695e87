"""Activity timeouts and retry policies of every workflow, in one place, each with why it is so.

Local activities run inside the workflow task on the worker that holds the workflow, with no round
trip through the server to dispatch them or to report back (on the dev server each such trip is tens
of milliseconds); the result is still recorded (a marker), retried and idempotent.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

# Registry writes take milliseconds: a worker that dies mid-write is written off after 10 s, and while
# Postgres restarts they retry every few seconds (at most 5 s apart), not every half minute, for as long
# as it takes. (This was defined four times; the artifact workflow's copy allowed 30 s and backed off
# to 30 s, which only made a review wait longer after a Postgres restart.)
REGISTRY_TIMEOUT = timedelta(seconds=10)
REGISTRY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5))
REGISTRY = workflow.LocalActivityConfig(start_to_close_timeout=REGISTRY_TIMEOUT, retry_policy=REGISTRY_RETRY)
# The same writes as scheduled (server-dispatched) activities, where a recorded history has them so:
# making them local changes the command sequence, so it waits for a re-recording of histories.
REGISTRY_SCHEDULED = workflow.ActivityConfig(start_to_close_timeout=REGISTRY_TIMEOUT, retry_policy=REGISTRY_RETRY)

# Placement is a pure computation over inventories the workflow already read: local, like the registry
# writes, with the default retry policy (it fails only on a bug, which a new worker version fixes).
PLACE = workflow.LocalActivityConfig(start_to_close_timeout=timedelta(seconds=10))


def inventory_read(task_queue: str) -> workflow.ActivityConfig:
    """A cluster's nodes and GPUs, read on the kube task queue: a few quick tries; a cluster that stays
    unreadable takes no replicas this time (the caller turns the error into an empty inventory)."""
    return workflow.ActivityConfig(task_queue=task_queue, start_to_close_timeout=timedelta(seconds=15),
                                   retry_policy=RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1)))


# An observation heartbeats every 2 s while it waits for news (activities/observe.py), so one whose heartbeat
# stops for 6 s lost its worker (killed, restarting): the server starts it again on another, and the new
# attempt carries on, so a crashing worker costs the workflow nothing. Only one still unanswered
# `watch.silence_seconds` past its report period (no observe worker, a hung API) is given up.
OBSERVE_HEARTBEAT_TIMEOUT = timedelta(seconds=6)
OBSERVE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5),
                            maximum_attempts=0)


def observe(task_queue: str, report_seconds: float, silence_seconds: float) -> workflow.ActivityConfig:
    return workflow.ActivityConfig(task_queue=task_queue,
                                   schedule_to_close_timeout=timedelta(seconds=report_seconds + silence_seconds),
                                   heartbeat_timeout=OBSERVE_HEARTBEAT_TIMEOUT, retry_policy=OBSERVE_RETRY)


# A person waits on an upgrade's plan (the update's answer): a registry that stays down refuses, it does
# not hang.
UPGRADE_PLAN = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3))
# The gateway's counters for one upgrade window: a gateway that cannot be read pauses the upgrade for a
# person rather than retrying forever.
GATEWAY_COUNTERS = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=15),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3))

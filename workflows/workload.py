"""WorkloadWorkflow (`workload/<id>`): lives while the workload exists.

plan (carried in) → read inventories → place → one ClusterRolloutWorkflow child per cluster, the
first as a canary and the rest in parallel once it serves → serving. A cluster that fails has its
replicas re-placed elsewhere; when that is impossible every applied cluster is rolled back (a
saga, shielded from cancellation) and the workflow fails with the cause. Updates `scale` and
`delete`; query `status`.

Serving is watched, not assumed: one look per cluster is always in flight (activities/observe.py),
reading its DGD every `watch.status_seconds` and its frontend every `watch.probe_seconds`, and
answering on news or after `watch.report_seconds`; the workflow acts on the verdict of
`wingsmith.reconcile.judge`: a missing or edited deployment is applied again, one that
stays unready or unreachable past the grace is drained and its replicas placed elsewhere (its old
DGD is removed once its cluster answers again). Stage, search attribute and registry say what was
observed (`degraded`, with the cluster and the cause). It continues as new every
`watch.looks_per_run` answered looks, or sooner when Temporal suggests, so its history stays bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError
from temporalio.exceptions import TimeoutError as TemporalTimeout

import workflows.endpoint as endpoint_workflow  # a module import: the two workflows signal each other
import workflows.upgrade as upgrades
from workflows.history import time_to_continue_as_new
from workflows.ids import CLUSTERS, MODEL, SHA, STAGE, WORKLOAD, cluster_rollout_workflow_id
from workflows.rollout import ClusterRolloutInput, ClusterRolloutResult, ClusterRolloutWorkflow

with workflow.unsafe.imports_passed_through():
    from activities.inventory import ReadInventoryInput, read_inventory
    from activities.observe import ObserveActivities, ObserveInput, last_heard
    from activities.workload import (
        ClusterTarget,
        DeploymentRecord,
        HealRecord,
        NoInput,
        PlaceInput,
        PlacementRecord,
        WorkloadActivities,
        WorkloadRecord,
    )
    from wingsmith.config import watch_task_queue
    from wingsmith.dynamo import dgd_name
    from wingsmith.endpoints import BackendDrained, BackendRef, EndpointRef, WorkloadRef
    from wingsmith.placement.models import ClusterInventory
    from wingsmith.reconcile import Applied, Observation, Verdict, judge
    from wingsmith.upgrade import UpgradeControl, UpgradeRequest, UpgradeStatus
    from wingsmith.workload_state import (
        ClusterState,
        DeleteRequest,
        ScaleRequest,
        Stage,
        WorkloadState,
        WorkloadStatus,
        WorkloadWorkflowInput,
    )
    from wingsmith.workloads import WorkloadPlan

SignalArg = TypeVar("SignalArg", WorkloadRef, BackendRef)

# Registry writes take milliseconds: a worker that dies mid-write is written off after 10 s, and
# while Postgres restarts they retry every few seconds, not every half minute.
# Local activities: they run inside the workflow task on the worker that holds the workflow, with no
# round trip through the server to dispatch them or to report back (on the dev server each such trip
# is tens of milliseconds); the result is still recorded (a marker), retried and idempotent.
_DB_TIMEOUT = timedelta(seconds=10)
_DB_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5))
_DB = workflow.LocalActivityConfig(start_to_close_timeout=_DB_TIMEOUT, retry_policy=_DB_RETRY)
# The heal and deployment records are still scheduled (server-dispatched) activities with the same
# limits; making them local changes the command sequence, so it waits for a re-recording of histories.
_DB_SCHEDULED = workflow.ActivityConfig(start_to_close_timeout=_DB_TIMEOUT, retry_policy=_DB_RETRY)


# A look heartbeats every 2 s while it waits for news (activities/observe.py), so one whose heartbeat
# stops for 6 s lost its worker (killed, restarting): the server starts it again on another, and the
# new attempt carries on the look, so a crashing worker costs the workflow nothing. Only a look still
# unanswered `watch.silence_seconds` past its report period (no watch worker, a hung API) is given up;
# the cluster is then shown unreachable once nothing was heard of it for `silence_seconds`: nothing
# can be known of it, and serving must not be claimed over it.
_LOOK_HEARTBEAT_TIMEOUT = timedelta(seconds=6)
_LOOK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5),
                          maximum_attempts=0)
# Replicas a heal could not place again are tried again, backing off up to this.
_PLACE_AGAIN_MAX = timedelta(minutes=10)


class _Unplaceable(Exception):
    pass


class _ChangeLock(asyncio.Lock):
    """The workload's lock, held by whatever changes its clusters (a scale, a heal, an upgrade's step,
    the teardown). It counts its releases, so a look can tell that what it observed without the lock
    may predate a change."""

    def __init__(self) -> None:
        super().__init__()
        self.changes = 0
        self.quiet = False  # set by a holder that changed nothing: this release does not count

    def release(self) -> None:
        if not self.quiet:
            self.changes += 1
        self.quiet = False
        super().release()


@workflow.defn
class WorkloadWorkflow:
    @workflow.init
    def __init__(self, params: WorkloadWorkflowInput) -> None:
        self.params = params
        self.plan = params.plan
        self.state = params.resume or WorkloadState()
        self.lock = _ChangeLock()
        self.deleting = False
        self.drained_endpoints: set[str] = set()
        self.backends_drained: set[tuple[str, BackendRef]] = set()  # (endpoint workflow id, backend)
        self.delete_by = "unknown"
        self.known_targets: dict[str, ClusterTarget] | None = None  # refreshed when a cluster is not in it
        self.place_again_wait = timedelta(0)
        self.placing_timer: asyncio.Task[None] | None = None  # placing again is due when it fires
        self.placing_due = False
        self.upgrade_run: upgrades.Upgrade | None = None  # the upgrade in flight (workflows/upgrade.py)
        self.upgrade_pending: str | None = None  # an upgrade update being planned
        # The watch (see _watch): per cluster its look in flight, what a finished one saw (None: no
        # answer) with the lock's change count at its start, the news key last acted on, when the
        # cluster last answered, and the timer running since its looks stopped answering.
        self.looking: dict[str, asyncio.Task[None]] = {}
        self.news: dict[str, tuple[int, Observation | None]] = {}
        self.known: dict[str, str] = {}
        self.heard: dict[str, datetime] = {}
        self.silence: dict[str, asyncio.Task[None]] = {}
        self.unregistered: set[str] = set()
        self.answers = 0  # answered looks this run

    # --- lifecycle ------------------------------------------------------------------------------

    @workflow.run
    async def run(self, params: WorkloadWorkflowInput) -> WorkloadStatus:
        # Its own attributes, so a workload started from user code is found like one the API started.
        workflow.upsert_search_attributes(
            [pair.key.value_set(pair.value) for pair in search_attributes(params, self.state.stage)]
            + ([CLUSTERS.value_set(sorted(self.state.clusters))] if self.state.clusters else []))
        if params.resume is None:
            await self._record("planning", "created", {"replicas": self.plan.replicas})
            try:
                async with self.lock:
                    await self._converge(self.plan.replicas, initial=True)
            except _Unplaceable as exc:
                return await self._roll_back(str(exc))
            except asyncio.CancelledError:
                await self._roll_back("cancelled during the first rollout", reraise=asyncio.CancelledError())
            self._set_stage("serving")
            await self._record("serving", f"serving:{self.state.placement_revision}", self._summary())
        await self._watch()
        await upgrades.end_before_delete(self)
        async with self.lock:
            await self._tear_down()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.status()

    # --- updates, signals, query ------------------------------------------------------------------

    @workflow.update
    async def scale(self, request: ScaleRequest) -> WorkloadStatus:
        async with self.lock:
            self._set_stage("scaling")
            await self._record("scaling", f"scale:{workflow.info().get_current_history_length()}",
                               {"from": self._replicas(), "to": request.replicas, "by": request.requested_by})
            try:
                await self._converge(request.replicas, initial=False)
            except _Unplaceable as exc:
                self._event(f"scale to {request.replicas} incomplete: {exc}")
            self.plan = self.plan.model_copy(update={"replicas": self._replicas()})
            self._set_stage("serving")
            length = workflow.info().get_current_history_length()
            await self._record("serving", f"serving:{self.state.placement_revision}:{length}", self._summary())
            return self.status()

    @scale.validator
    def _validate_scale(self, request: ScaleRequest) -> None:
        if self.deleting and self.state.stage not in ("deleted", "failed"):
            # The stage still shows the work in flight; the reason is the delete queued behind it.
            raise ApplicationError("a delete of this workload is pending; it cannot be scaled", type="NotScalable")
        if self.state.stage in ("deleting", "deleted", "failed"):
            raise ApplicationError(f"workload is {self.state.stage}; it cannot be scaled", type="NotScalable")
        if self.upgrade_run is not None or self.upgrade_pending is not None:
            raise ApplicationError("an upgrade is running; scale once it ends (or abort it)", type="NotScalable")

    @workflow.update
    async def upgrade(self, request: UpgradeRequest) -> UpgradeStatus:
        """Move to another approved artifact, progressively (workflows/upgrade.py); answers once started."""
        return await upgrades.start(self, request)

    @upgrade.validator
    def _validate_upgrade(self, request: UpgradeRequest) -> None:
        upgrades.validate(self, request)

    @workflow.update
    def pause_upgrade(self, request: UpgradeControl) -> UpgradeStatus:
        return upgrades.control(self, "pause", request)

    @pause_upgrade.validator
    def _validate_pause(self, request: UpgradeControl) -> None:
        upgrades.validate_control(self, "pause")

    @workflow.update
    def resume_upgrade(self, request: UpgradeControl) -> UpgradeStatus:
        return upgrades.control(self, "resume", request)

    @resume_upgrade.validator
    def _validate_resume(self, request: UpgradeControl) -> None:
        upgrades.validate_control(self, "resume")

    @workflow.update
    def abort_upgrade(self, request: UpgradeControl) -> UpgradeStatus:
        return upgrades.control(self, "abort", request)

    @abort_upgrade.validator
    def _validate_abort(self, request: UpgradeControl) -> None:
        upgrades.validate_control(self, "abort")

    @workflow.update
    async def delete(self, request: DeleteRequest) -> WorkloadStatus:
        self.delete_by = request.requested_by
        self.deleting = True
        await workflow.wait_condition(lambda: self.state.stage == "deleted")
        return self.status()

    @delete.validator
    def _validate_delete(self, request: DeleteRequest) -> None:
        if self.state.stage in ("deleted", "failed"):
            raise ApplicationError(f"workload is already {self.state.stage}", type="AlreadyDeleted")

    @workflow.signal
    def subscribe(self, endpoint: EndpointRef) -> None:
        """An endpoint follows this workload: it is told about changes and drains it before deletion."""
        if endpoint.endpoint_workflow_id not in self.state.subscribers:
            self.state.subscribers.append(endpoint.endpoint_workflow_id)
        # Back after leaving it (endpoint membership changed): an old "drained" must not let a delete skip it.
        self.drained_endpoints.discard(endpoint.endpoint_workflow_id)

    @workflow.signal
    def unsubscribe(self, endpoint: EndpointRef) -> None:
        if endpoint.endpoint_workflow_id in self.state.subscribers:
            self.state.subscribers.remove(endpoint.endpoint_workflow_id)

    @workflow.signal
    def drained(self, endpoint: EndpointRef) -> None:
        """That endpoint no longer routes to this workload: the delete may go on."""
        self.drained_endpoints.add(endpoint.endpoint_workflow_id)

    @workflow.signal
    def backend_drained(self, drained: BackendDrained) -> None:
        """That endpoint no longer routes to one of this workload's clusters: the scale-down may go on."""
        self.backends_drained.add((drained.endpoint_workflow_id, drained.backend))

    @workflow.query
    def status(self) -> WorkloadStatus:
        return WorkloadStatus(workload_id=self.plan.workload_id, stage=self.state.stage, replicas=self._replicas(),
                              served_model_name=self.plan.served_model_name,
                              clusters=sorted(self.state.clusters.values(), key=lambda c: c.cluster),
                              failure=self.state.failure, events=self.state.events[-50:],
                              upgrade=self.state.upgrade, artifact_id=self.plan.artifact_id, team=self.params.team)

    # --- converging on a replica count ---------------------------------------------------------------

    async def _converge(self, target: int, *, initial: bool) -> None:
        """Place or remove replicas until `target` serve, re-placing what a failed cluster held."""
        current = self._held()
        if target < current:
            desired = self._shrink(target)
            leaving = sorted(name for name, n in desired.items() if n == 0)
            if leaving:
                await self._drain_clusters(leaving)
            await self._apply(desired)
            for name in leaving:
                for wid in list(self.state.subscribers):
                    await self._signal(wid, endpoint_workflow.EndpointWorkflow.backend_gone, self._backend(name))
            return
        missing = target - current
        canary = initial
        while missing > 0:
            self._set_stage("placing")
            desired = await self._place(missing)
            self._set_stage("rolling_out")
            failed = await self._apply(desired, canary=canary)
            canary = False
            missing = sum(failed.values())

    def _shrink(self, target: int) -> dict[str, int]:
        """Take replicas away from the clusters holding the most (ties: the last by name) first."""
        desired = {name: c.replicas for name, c in self.state.clusters.items() if c.state in _HOLDING}
        while sum(desired.values()) > target:
            name = max(desired, key=lambda n: (desired[n], n))
            desired[name] -= 1
        return desired

    async def _place(self, replicas: int) -> dict[str, int]:
        targets = await self._targets()
        inventories = await asyncio.gather(*(self._inventory(t) for t in targets.values()))
        c = self.plan.placement.constraints
        denied = sorted(set(c.denied_clusters) | set(self.state.excluded))
        constraints = c.model_copy(update={"denied_clusters": denied})
        plan = self.plan.placement.model_copy(update={"replicas": replicas, "constraints": constraints})
        decision = await workflow.execute_local_activity_method(
            WorkloadActivities.place, PlaceInput(plan=plan, inventories=list(inventories),
                                                 clusters=[t.info for t in targets.values()]),
            start_to_close_timeout=timedelta(seconds=10))  # local, like the registry writes
        self.state.placement_revision += 1
        await workflow.execute_local_activity_method(WorkloadActivities.record_placement, PlacementRecord(
            workload_id=self.plan.workload_id, revision=self.state.placement_revision, decision=decision,
            workflow_id=workflow.info().workflow_id), **_DB)
        self._event(f"placement {self.state.placement_revision}: {decision.summary}")
        if decision.placed == 0:
            raise _Unplaceable(decision.summary)
        if not decision.complete and not self.state.clusters:
            raise _Unplaceable(decision.summary)
        desired = {name: c.replicas for name, c in self.state.clusters.items() if c.state == "serving"}
        for name, count in decision.replicas.items():
            desired[name] = desired.get(name, 0) + count
        if not decision.complete:
            self._event(f"{decision.unplaced} replica(s) could not be placed: {decision.summary}")
        return desired

    async def _apply(self, desired: dict[str, int], canary: bool = False) -> dict[str, int]:
        """Roll out every cluster whose replica count changes. Returns replicas lost to failed clusters."""
        changes = {name: n for name, n in desired.items()
                   if n != self.state.clusters.get(name, ClusterState(cluster=name)).replicas
                   or self.state.clusters.get(name, ClusterState(cluster=name)).state != "serving"}
        if not changes:
            return {}
        order = sorted(changes, key=lambda n: (-changes[n], n))
        targets = await self._targets()
        failed: dict[str, int] = {}
        batches = [order[:1], order[1:]] if canary else [order]
        for batch in batches:
            results = await asyncio.gather(*(self._roll_out(targets[name], changes[name]) for name in batch
                                             if name in targets))
            failed.update({name: n for name, n in results if n})
            if canary and failed:
                self._event(f"canary {batch[0]} failed; placing its replicas elsewhere before going on")
                return failed | {name: changes[name] for name in order[1:]}
        self._update_search_attributes()
        return failed

    async def _roll_out(self, target: ClusterTarget, replicas: int) -> tuple[str, int]:
        """Returns (cluster, replicas lost) — 0 when it serves or was removed as asked."""
        name = target.info.name
        state = self.state.clusters.setdefault(name, ClusterState(cluster=name))
        mode: Literal["apply", "delete"] = "delete" if replicas == 0 else "apply"
        state.state = "deleting" if mode == "delete" else "rolling_out"
        try:
            result = await self._cluster_rollout(target, replicas, mode)
        except ChildWorkflowError as err:
            state.state, state.error = "failed", _cause(err)
            if name not in self.state.excluded:
                self.state.excluded.append(name)
            self._event(f"{name} failed: {state.error}")
            if mode == "apply":
                await self._remove_failed(target)
            return name, replicas
        if mode == "delete":
            del self.state.clusters[name]
            self._event(f"{name} removed")
            return name, 0
        state.state, state.replicas, state.error = "serving", replicas, None
        state.dgd_name, state.frontend_url, state.revision = result.dgd_name, result.frontend_url, self.plan.revision
        state.generation, state.spec_hash, state.unhealthy_since, state.drift = (
            result.generation, result.spec_hash, None, None)
        self._event(f"{name} serving {replicas} replica(s) at {result.frontend_url}")
        await self._notify_subscribers()
        return name, 0

    async def _cluster_rollout(self, target: ClusterTarget, replicas: int, mode: Literal["apply", "delete"],
                               plan: WorkloadPlan | None = None) -> ClusterRolloutResult:
        """`plan`: another version's (an upgrade's); the workload's own by default."""
        name, plan = target.info.name, plan or self.plan
        return await workflow.execute_child_workflow(
            ClusterRolloutWorkflow.run, self._rollout_input(target, replicas, mode, plan),
            id=cluster_rollout_workflow_id(plan.workload_id, name, plan.revision),
            task_queue=workflow.info().task_queue,
            static_summary=f"{mode} {plan.workload_id} on {name} ({replicas} replicas)"
            + (f", revision {plan.revision}" if plan.revision else ""),
            search_attributes=TypedSearchAttributes([
                SearchAttributePair(WORKLOAD, self.plan.workload_id), SearchAttributePair(CLUSTERS, [name]),
                SearchAttributePair(STAGE, "rollout")]))

    async def _remove_failed(self, target: ClusterTarget) -> None:
        """A failed deployment is not left running: crash-looping pods hold their GPUs, and pods that
        found no node would take one later for replicas now placed elsewhere."""
        name = target.info.name
        try:
            await self._cluster_rollout(target, 0, "delete")
        except ChildWorkflowError as err:
            self._event(f"{name}: the failed deployment could not be removed now ({_cause(err)}); "
                        f"it is removed with the workload")
            return
        self.state.clusters[name].dgd_name = None
        self._event(f"{name}: the failed deployment was removed")

    def _rollout_input(self, target: ClusterTarget, replicas: int, mode: Literal["apply", "delete"],
                       plan: WorkloadPlan) -> ClusterRolloutInput:
        return ClusterRolloutInput(
            mode=mode, workload_id=plan.workload_id, cluster=target.info.name, revision=plan.revision,
            kubeconfig=target.kubeconfig, namespace=plan.namespace,
            spec=plan.rollout_spec(target.info.name, replicas) if replicas else None,
            weight_bytes=plan.weight_bytes, kube_task_queue=self.params.kube_task_queue,
            ready_deadline_seconds=self.params.ready_deadline_seconds, poll_seconds=self.params.poll_seconds,
            unschedulable_grace_seconds=self.params.unschedulable_grace_seconds)

    # --- watching while serving ------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Hear from every cluster through its look (one in flight per cluster, answering on news) and
        act on what they say, until the workload is deleted; continue as new after `looks_per_run`
        answers (or when the history is long enough), once no handler is running."""
        watch = self.params.watch
        def time_to_continue() -> bool:  # not while an upgrade runs: it carries on in this run
            return self.upgrade_run is None and (self.answers >= watch.looks_per_run
                                                 or time_to_continue_as_new(self.params.history_limit))

        def work() -> bool:  # a scale or a heal holds the lock: news waits for it, then may be stale
            return not self.lock.locked() and (bool(self.news) or self.placing_due or self._looks_missing())

        while True:
            await workflow.wait_condition(lambda: self.deleting or time_to_continue() or work())
            if self.deleting:
                await self._end_looks()
                return
            if time_to_continue():
                # A delete arriving meanwhile is a running handler that waits for this loop: let it win.
                await workflow.wait_condition(
                    lambda: self.deleting or (workflow.all_handlers_finished() and not self.lock.locked()))
                await self._end_looks()
                if self.deleting:
                    return
                workflow.continue_as_new(self.params.model_copy(update={"resume": self.state, "plan": self.plan}))
            if self.news or self.placing_due:
                await self._act_on_news()
            if not self.lock.locked():
                await self._start_looks()

    def _watched(self) -> list[str]:
        return sorted(name for name, c in self.state.clusters.items() if c.state in _HOLDING)

    def _to_look_at(self) -> list[str]:
        watched = self._watched()
        return [*watched, *(n for n in self.state.leftovers if n not in watched)]

    def _looks_missing(self) -> bool:
        """A cluster to hear from has no look in flight nor news waiting. Clusters not registered
        cannot be looked at."""
        wanted = {n for n in self._to_look_at() if n not in self.unregistered}
        return bool(wanted - set(self.looking) - set(self.news))

    async def _start_looks(self) -> None:
        # A look in flight is never cancelled: cancelling races its answer (a command for an activity
        # that just completed fails the workflow task). One that a change under the lock made stale
        # (a scale, a heal, an upgrade's step) answers on the change it looks at, or after its report
        # period; its news is dropped then and the next look answers at once. One for a cluster no
        # longer held is not acted on.
        names = self._to_look_at()
        fresh = [n for n in names if n not in self.looking and n not in self.news and n not in self.unregistered]
        if not fresh:
            return
        targets = await self._watch_targets(fresh)
        watched = self._watched()
        for name in fresh:
            if name not in targets:
                self.unregistered.add(name)
                self._event(f"{name} is no longer registered: it cannot be watched")
            elif name not in self.looking:
                _track(self.looking, name, self._look(targets[name], watched=name in watched,
                                                      changes=self.lock.changes))

    async def _end_looks(self) -> None:
        """Before the run ends or continues as new. Looks in flight are left, not cancelled (see
        _start_looks): a look's heartbeat finds its run closed, and the look ends there."""
        for task in self.silence.values():
            task.cancel()
        self._stop_placing_timer()
        await workflow.wait_condition(lambda: not self.silence)
        self.news.clear()

    async def _look(self, target: ClusterTarget, *, watched: bool, changes: int) -> None:
        """One look at one cluster, without the lock, so a scale never waits for it; what it saw is
        news for `_act_on_news`, which drops it if a change under the lock made it stale."""
        seen = await self._observe(target, watched=watched)
        if seen is None:  # a look that failed at once must not be asked again at once, forever
            await workflow.sleep(timedelta(seconds=self.params.watch.status_seconds))
        self.news[target.info.name] = (changes, seen)

    async def _act_on_news(self) -> None:
        async with self.lock:
            changed = (self.state.heals, self.state.placement_revision)
            news, self.news = self.news, {}
            for name, (changes, seen) in sorted(news.items()):
                if self.deleting:
                    return
                if changes != self.lock.changes:
                    self.known.pop(name, None)  # seen before a change: look again, and answer at once
                    continue
                if seen is None:
                    self._start_silence(name)  # no answer; the next look asks again
                    continue
                self.answers += 1
                self.known[name] = seen.news_key()
                target = (self.known_targets or {}).get(name)
                if target is None:
                    continue
                if name in self._watched():
                    await self._act_on(target, seen)
                elif name in self.state.leftovers:
                    await self._remove_leftover(target, seen)
            if self.placing_due:
                self.placing_due, self.placing_timer = False, None
                if self._held() < self.plan.replicas:
                    await self._place_again("replicas short of the target")
            elif self._held() < self.plan.replicas and self.placing_timer is None:
                # Short of the target (a heal or the first placement could not place everything):
                # placement is asked again, backing off, until inventories change.
                self._back_off_placing()
            await self._show_observed()
            # Only a heal or a placement changes clusters: hearing that all is well leaves other
            # clusters' looks in flight current.
            self.lock.quiet = changed == (self.state.heals, self.state.placement_revision)

    async def _watch_targets(self, names: list[str]) -> dict[str, ClusterTarget]:
        """Registered clusters, read once per run (and again when one is not known yet): looks stay cheap."""
        if self.known_targets is None or not set(names) <= set(self.known_targets):
            self.known_targets = await self._targets()
        return self.known_targets

    async def _observe(self, target: ClusterTarget, *, watched: bool) -> Observation | None:
        """Waits for news of the cluster (activities/observe.py). None: no answer, because no attempt
        answered in time (no watch worker, a hung API) or the look failed; its last heartbeat says when
        the cluster was last read, which still counts as hearing from it."""
        name, watch = target.info.name, self.params.watch
        state = self.state.clusters.get(name)
        # A cluster with a problem answers every status period, so its grace is counted; one that serves
        # as applied (or a leftover that still does not answer) only on news.
        settled = state is None or state.unhealthy_since is None
        report = watch.report_seconds if settled else watch.status_seconds
        try:
            seen = await workflow.execute_activity_method(
                ObserveActivities.look, ObserveInput(
                    cluster=name, kubeconfig=target.kubeconfig, namespace=self.plan.namespace,
                    name=(state and state.dgd_name) or dgd_name(self.plan.workload_id, name, self.plan.revision),
                    served_model_name=self.plan.served_model_name if watched else None, known=self.known.get(name),
                    status_seconds=watch.status_seconds, probe_seconds=watch.probe_seconds, report_seconds=report),
                task_queue=watch_task_queue(self.params.kube_task_queue),
                schedule_to_close_timeout=timedelta(seconds=report + watch.silence_seconds),
                heartbeat_timeout=_LOOK_HEARTBEAT_TIMEOUT, retry_policy=_LOOK_RETRY)
        except ActivityError as err:
            heard = last_heard(err.cause.last_heartbeat_details if isinstance(err.cause, TemporalTimeout) else None)
            if heard is not None:
                self.heard[name] = max(heard, self.heard.get(name, heard))
            return None
        self.heard[name] = max(seen.at, self.heard.get(name, seen.at))
        if name in self.silence:
            self.silence[name].cancel()
        return seen

    def _start_silence(self, name: str) -> None:
        """Looks without an answer are skipped, unless none came for `watch.silence_seconds`: then the
        cluster counts as unreachable (and its grace starts). A timer decides, not a comparison with
        the clock, so the decision replays exactly."""
        if name not in self.silence:
            since = self.heard.setdefault(name, workflow.now())
            _track(self.silence, name, self._silent_after(name, since))

    async def _silent_after(self, name: str, since: datetime) -> None:
        limit = timedelta(seconds=self.params.watch.silence_seconds)
        await workflow.sleep(max(since + limit - workflow.now(), timedelta(seconds=0.1)))
        del self.silence[name]
        if self.heard[name] > since:  # a lost look read the cluster meanwhile: count from then
            self._start_silence(name)
            return
        at = since + limit
        self.news[name] = (self.lock.changes, Observation(
            cluster=name, at=at, reachable=False,
            error=f"no answer to the plane's looks since {since.isoformat(timespec='seconds')} (its API hangs, "
                  "or the plane's watch worker is gone)"))

    async def _act_on(self, target: ClusterTarget, seen: Observation) -> None:
        state = self.state.clusters.get(target.info.name)
        if state is None or state.state not in _HOLDING:
            return  # changed by an earlier heal of this look
        if state.spec_hash is None and seen.exists:  # applied before the plane recorded what it applied
            state.spec_hash, state.generation = seen.spec_hash, seen.generation
        applied = Applied(cluster=state.cluster, dgd_name=state.dgd_name or dgd_name(self.plan.workload_id,
                                                                                      state.cluster, state.revision),
                          namespace=self.plan.namespace, spec_hash=state.spec_hash or "",
                          generation=state.generation, replicas=state.replicas,
                          served_model_name=self.plan.served_model_name)
        verdict = judge(applied, seen, unhealthy_since=state.unhealthy_since, policy=self.plan.drift,
                        grace=timedelta(seconds=self.params.watch.grace_seconds))
        if verdict.action in ("ok", "report"):
            await self._healthy(state, drift=verdict.cause if verdict.action == "report" else None)
        else:
            await self._degrade(state, verdict)
            if verdict.action == "reapply":
                await self._reapply(target, state, verdict)
            elif verdict.action == "replace":
                await self._replace(target, state, verdict)

    async def _healthy(self, state: ClusterState, *, drift: str | None = None) -> None:
        """Serving; under `drift: report` possibly with an edit left in place, said once, not every look."""
        if state.drift != drift:
            self._event(f"{state.cluster}: {drift} (left in place: drift policy is report)" if drift
                        else f"{state.cluster}: the edit outside the plane is gone")
            state.drift = drift
        if state.state == "degraded":
            took = _seconds(workflow.now() - (state.unhealthy_since or workflow.now()))
            self._event(f"{state.cluster} serving again by itself after {took} s (was: {state.error})")
            state.state, state.error = "serving", None
            await self._record_deployment(state, "serving")
            await self._notify_subscribers()
        state.unhealthy_since = None

    async def _degrade(self, state: ClusterState, verdict: Verdict) -> None:
        """Not serving is shown at once: the registry, the stage and the endpoints (which stop routing
        there) hear of it before any heal starts."""
        state.unhealthy_since = verdict.unhealthy_since
        if state.state == "degraded" and state.error == verdict.cause:
            return
        was = state.state
        state.state, state.error = "degraded", verdict.cause
        self._event(f"{state.cluster} degraded: {verdict.cause}")
        await self._show_observed()  # the stage flips with the cluster, before any registry write
        await self._record_deployment(state, "degraded", {"cause": verdict.cause})
        if was == "serving":
            await self._notify_subscribers()

    async def _reapply(self, target: ClusterTarget, state: ClusterState, verdict: Verdict) -> None:
        """A missing or edited deployment is rolled out again, as applied, through a rollout child."""
        name, since = state.cluster, verdict.unhealthy_since or workflow.now()
        self.state.heals += 1
        _, lost = await self._roll_out(target, state.replicas)
        if not lost:
            await self._healed(name, "reapply", verdict, since, "serving again")
            return
        failed = self.state.clusters[name].error
        await self._place_again(f"{name} could not be healed in place")
        await self._healed(name, "reapply", verdict, since,
                           f"could not be applied again ({failed}); its replicas were placed elsewhere")

    async def _replace(self, target: ClusterTarget, state: ClusterState, verdict: Verdict) -> None:
        """Past the grace: endpoints stop routing there, its replicas go elsewhere, and its deployment is
        removed as soon as the cluster answers (it may be unreachable now)."""
        name, since = state.cluster, verdict.unhealthy_since or workflow.now()
        self.state.heals += 1
        await self._drain_clusters([name])
        state.state = "failed"
        for bucket in (self.state.excluded, self.state.leftovers):
            if name not in bucket:
                bucket.append(name)
        await self._record_deployment(state, "failed", {"cause": verdict.cause})
        for wid in list(self.state.subscribers):
            await self._signal(wid, endpoint_workflow.EndpointWorkflow.backend_gone, self._backend(name))
        placed = await self._place_again(f"{name} given up on")
        outcome = "its replicas serve elsewhere" if placed else "its replicas could not be placed elsewhere yet"
        await self._healed(name, "replace", verdict, since, outcome)

    async def _place_again(self, why: str) -> bool:
        """Place what is missing of the target replica count; on failure retry later, backing off."""
        try:
            await self._converge(self.plan.replicas, initial=False)
        except _Unplaceable as exc:
            self._back_off_placing()
            self._event(f"{why}: replicas could not be placed ({exc}); trying again in "
                        f"{_seconds(self.place_again_wait)} s")
            return False
        if self._held() < self.plan.replicas:
            self._back_off_placing()
            return False
        self._stop_placing_timer()
        self.place_again_wait = timedelta(0)
        return True

    def _back_off_placing(self) -> None:
        """Placing again is due after the next back-off: a timer, so the decision replays exactly."""
        first = timedelta(seconds=self.params.watch.place_again_seconds)
        self.place_again_wait = min(max(2 * self.place_again_wait, first), max(first, _PLACE_AGAIN_MAX))
        self._stop_placing_timer()
        self.placing_timer = asyncio.create_task(self._placing_after(self.place_again_wait))

    async def _placing_after(self, wait: timedelta) -> None:
        await workflow.sleep(wait)
        self.placing_due = True

    def _stop_placing_timer(self) -> None:
        if self.placing_timer is not None:
            self.placing_timer.cancel()
        self.placing_timer, self.placing_due = None, False

    async def _remove_leftover(self, target: ClusterTarget, seen: Observation) -> None:
        """A cluster given up on answers again: its old deployment goes, so the workload never holds
        more than its target, and the cluster may take replicas again."""
        name = target.info.name
        if not seen.reachable:
            return
        if seen.exists:
            try:
                await self._cluster_rollout(target, 0, "delete")
            except ChildWorkflowError as err:
                self._event(f"{name} answers again, but its old deployment could not be removed yet: {_cause(err)}")
                return
        self.state.leftovers.remove(name)
        if name in self.state.excluded:
            self.state.excluded.remove(name)
        if name in self.state.clusters and self.state.clusters[name].state == "failed":
            del self.state.clusters[name]
            self._update_search_attributes()
        self._event(f"{name} answers again: " + ("its old deployment was removed" if seen.exists
                                                 else "it holds no deployment of this workload"))

    async def _healed(self, cluster: str, action: str, verdict: Verdict, since: datetime, outcome: str) -> None:
        took = _seconds(workflow.now() - since)
        self._event(f"healed {cluster} ({action}: {verdict.cause}): {outcome} after {took} s")
        info = workflow.info()
        await workflow.execute_activity_method(WorkloadActivities.record_heal, HealRecord(
            workload_id=self.plan.workload_id, workflow_id=info.workflow_id, step=f"heal:{self.state.heals}",
            cluster=cluster, action=action, problem=verdict.problem or "other", cause=verdict.cause or "",
            seconds=took, outcome=outcome), **_DB_SCHEDULED)

    async def _show_observed(self) -> None:
        """Stage and registry say what the last looks saw: `degraded` names each cluster and its cause,
        or the replicas missing; never `serving` over nothing."""
        problems = {n: c.error or "degraded" for n, c in sorted(self.state.clusters.items()) if c.state == "degraded"}
        missing = self.plan.replicas - self._replicas() - upgrades.standing_in(self)
        stage: Stage = "degraded" if problems or missing > 0 else "serving"
        if stage == self.state.stage:
            return
        self._set_stage(stage)
        detail: dict[str, Any] = {"clusters": problems} if problems else self._summary()
        if stage == "degraded" and missing > 0:
            detail["missing_replicas"] = missing
        length = workflow.info().get_current_history_length()
        await self._record(stage, f"{stage}:{self.state.heals}:{length}", detail)

    async def _record_deployment(self, state: ClusterState, phase: str, detail: dict[str, Any] | None = None) -> None:
        info = workflow.info()
        await workflow.execute_activity_method(WorkloadActivities.record_deployment, DeploymentRecord(
            workload_id=self.plan.workload_id, cluster=state.cluster, revision=state.revision,
            dgd_name=state.dgd_name or dgd_name(self.plan.workload_id, state.cluster, state.revision),
            namespace=self.plan.namespace,
            replicas=state.replicas, state=phase, frontend_url=state.frontend_url,
            detail={"generation": state.generation, **(detail or {})}, source=info.workflow_id,
            step=f"{info.run_id}:watch:{state.cluster}:{phase}:{info.get_current_history_length()}"), **_DB_SCHEDULED)

    # --- teardown and rollback ------------------------------------------------------------------------

    async def _tear_down(self) -> None:
        self._set_stage("deleting")
        await self._record("deleting", "deleting", {"by": self.delete_by})
        await self._drain_endpoints()
        await self._delete_everywhere()
        if self.state.clusters:
            await self._retry_leftover_deletes()
        self._set_stage("deleted")
        await self._record("deleted", "deleted", {"by": self.delete_by})

    async def _drain_endpoints(self) -> None:
        """Endpoints stop routing to this workload (and let in-flight requests finish) before it goes."""
        if not self.state.subscribers:
            return
        for wid in list(self.state.subscribers):
            if not await self._signal(wid, endpoint_workflow.EndpointWorkflow.workload_deleting, self._me()):
                # An endpoint that ended (deleted meanwhile) routes nothing: waiting for it would
                # hold the teardown for the whole grace period.
                self.drained_endpoints.add(wid)
        try:
            await workflow.wait_condition(lambda: set(self.state.subscribers) <= self.drained_endpoints,
                                          timeout=timedelta(seconds=self.params.drain_grace_seconds))
        except TimeoutError:
            self._event("endpoints did not confirm draining within the grace period; deleting anyway")

    def _backend(self, cluster: str) -> BackendRef:
        held = self.state.clusters.get(cluster)
        return BackendRef(cluster=cluster, workload_id=self.plan.workload_id,
                          revision=held.revision if held else self.plan.revision)

    def _me(self) -> WorkloadRef:
        return WorkloadRef(workload_id=self.plan.workload_id)

    async def _drain_clusters(self, clusters: list[str]) -> None:
        """Endpoints stop sending new requests to these clusters and let in-flight ones finish before
        the scale-down removes their deployments (as a delete drains the whole workload)."""
        await self._drain_backends([self._backend(name) for name in clusters], ", ".join(clusters))

    async def _drain_backends(self, backends: list[BackendRef], clusters: str) -> None:
        waiting: set[tuple[str, BackendRef]] = set()
        for wid in list(self.state.subscribers):
            for backend in backends:
                if await self._signal(wid, endpoint_workflow.EndpointWorkflow.backend_leaving, backend):
                    waiting.add((wid, backend))
        try:
            await workflow.wait_condition(lambda: waiting <= self.backends_drained,
                                          timeout=timedelta(seconds=self.params.drain_grace_seconds))
            if waiting:
                self._event(f"endpoints drained {clusters}")
        except TimeoutError:
            self._event(f"endpoints did not confirm draining {clusters} in time; removing anyway")
        self.backends_drained -= waiting

    async def _delete_everywhere(self) -> None:
        targets = await self._targets()
        names = sorted(self.state.clusters)
        await asyncio.gather(*(self._roll_out(targets[n], 0) for n in names if n in targets),
                             return_exceptions=True)

    async def _retry_leftover_deletes(self) -> None:
        """Like a Kubernetes finalizer: "deleted" means no DGD is left. A cluster that refuses the
        delete (access revoked, API down) is retried with backoff, its error in the events, until the
        cause is fixed; a cluster no longer registered cannot be reached, so its DGD is reported left."""
        wait = max(5.0, self.params.poll_seconds * 10)
        while self.state.clusters:
            registered = await self._targets()
            for name in sorted(set(self.state.clusters) - set(registered)):
                self._event(f"{name} is no longer registered: its deployment, if any, is left there")
                del self.state.clusters[name]
            if not self.state.clusters:
                return
            errors = "; ".join(f"{n}: {c.error or 'not removed'}" for n, c in sorted(self.state.clusters.items()))
            self._event(f"deployments left ({errors}); retrying in {wait:.0f}s")
            await workflow.sleep(timedelta(seconds=wait))
            wait = min(wait * 2, 300.0)
            await self._delete_everywhere()

    async def _roll_back(self, cause: str, reraise: BaseException | None = None) -> WorkloadStatus:
        """The saga's compensation: remove every DGD this workload applied, then fail with the cause.
        Shielded so that a cancellation arriving meanwhile cannot leave half the clusters behind."""
        self.state.failure = cause
        self._event(f"rolling back: {cause}")
        await asyncio.shield(asyncio.ensure_future(self._delete_everywhere()))
        self._set_stage("failed")
        await self._record("failed", "failed", {"cause": cause})
        if reraise is not None:
            raise reraise
        raise ApplicationError(f"workload {self.plan.workload_id} could not be placed and served: {cause}",
                               type="WorkloadFailed", non_retryable=True)

    # --- helpers -----------------------------------------------------------------------------------

    async def _targets(self) -> dict[str, ClusterTarget]:
        targets = await workflow.execute_local_activity_method(WorkloadActivities.list_clusters, NoInput(), **_DB)
        return {t.info.name: t for t in targets.clusters}

    async def _inventory(self, target: ClusterTarget) -> ClusterInventory:
        if target.manual_inventory is not None:
            return target.manual_inventory
        try:
            return await workflow.execute_activity(
                read_inventory, ReadInventoryInput(cluster=target.info.name, kubeconfig=target.kubeconfig),
                task_queue=self.params.kube_task_queue, start_to_close_timeout=timedelta(seconds=15),
                retry_policy=RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1)))
        except ActivityError as err:
            # A cluster that stays unreadable takes no replicas this time; letting the error out would
            # fail the whole workflow with nothing rolled back and the registry left saying "placing".
            cause = getattr(err.cause, "message", None) or str(err)
            return ClusterInventory(cluster=target.info.name, error=f"unreadable after retries: {cause}")

    def _replicas(self) -> int:
        return sum(c.replicas for c in self.state.clusters.values() if c.state == "serving")

    def _held(self) -> int:
        """Replicas serving or degraded: a degraded cluster's replicas are the watch's to heal or move
        (and those of an upgrade's new version that stand in for old ones)."""
        return sum(c.replicas for c in self.state.clusters.values() if c.state in _HOLDING) + upgrades.standing_in(self)

    def _summary(self) -> dict[str, int]:
        return {name: c.replicas for name, c in sorted(self.state.clusters.items()) if c.state == "serving"}

    async def _record(self, state: str, step: str, detail: dict[str, Any]) -> None:
        info = workflow.info()
        await workflow.execute_local_activity_method(WorkloadActivities.record_workload, WorkloadRecord(
            workload_id=self.plan.workload_id, artifact_id=self.plan.artifact_id,
            spec=self.plan.model_dump(mode="json", include={"hardware", "layout", "variant", "features", "replicas",
                                                            "served_model_name", "engine", "gpus_per_replica",
                                                            "max_num_seqs", "max_num_seqs_source", "follow"}),
            state=state, workflow_id=info.workflow_id, requested_by=self.params.requested_by,
            team=self.params.team, step=f"{info.run_id}:{step}", detail=detail), **_DB)

    async def _notify_subscribers(self) -> None:
        for wid in list(self.state.subscribers):
            await self._signal(wid, endpoint_workflow.EndpointWorkflow.workload_changed, self._me())

    async def _signal(self, workflow_id: str, signal: Callable[[endpoint_workflow.EndpointWorkflow, SignalArg], None],
                      arg: SignalArg) -> bool:
        handle = workflow.get_external_workflow_handle_for(endpoint_workflow.EndpointWorkflow.run, workflow_id)
        try:
            await handle.signal(signal, arg)
            return True
        except Exception as exc:  # noqa: BLE001 - an endpoint that is gone no longer needs telling
            self._event(f"could not signal {workflow_id}: {exc}")
            return False

    def _set_stage(self, stage: Stage) -> None:
        self.state.stage = stage
        workflow.upsert_search_attributes([STAGE.value_set(stage)])

    def _update_search_attributes(self) -> None:
        workflow.upsert_search_attributes([CLUSTERS.value_set(sorted(self.state.clusters))])

    def _event(self, text: str) -> None:
        self.state.events.append(f"{workflow.now().isoformat(timespec='seconds')} {text}")
        self.state.events = self.state.events[-100:]


_HOLDING = ("serving", "degraded")


def _track(tasks: dict[str, asyncio.Task[None]], name: str, work: Coroutine[Any, Any, None]) -> None:
    """Run `work` as `tasks[name]` until it ends, however it ends (a task cancelled before it started
    never runs its own `finally`)."""
    task = tasks[name] = asyncio.create_task(work)
    task.add_done_callback(lambda done: tasks.pop(name) if tasks.get(name) is done else None)


def _seconds(delta: timedelta) -> float:
    return round(delta.total_seconds(), 1)


def _cause(err: ChildWorkflowError | ActivityError) -> str:
    return getattr(err.cause, "message", None) or str(err)


def search_attributes(params: WorkloadWorkflowInput, stage: str = "planning") -> list[SearchAttributePair[Any]]:
    """What the workload is found by: its model, the commit, its id and its stage."""
    repo_id = params.plan.artifact_id.rsplit("@", 1)[0]
    return [SearchAttributePair(STAGE, stage), SearchAttributePair(MODEL, repo_id),
            SearchAttributePair(SHA, params.plan.artifact_sha), SearchAttributePair(WORKLOAD, params.plan.workload_id)]


def start_search_attributes(params: WorkloadWorkflowInput) -> TypedSearchAttributes:
    return TypedSearchAttributes(search_attributes(params))

"""A workload's progressive upgrade, run by its WorkloadWorkflow (`workload/<id>`) beside the observing.

It works through the workload's public members (workflows/workload/state.py) and its cluster
operations (workflows/workload/cluster_ops.py), the same ones converging and healing use.

`upgrade` (an update) plans the new version from the registry (the artifact approved, not
superseded, of the same repository; the workload's shape re-checked), then returns at once while
the rollout goes on in the workflow:

- cluster by cluster, the canary (the cluster holding most replicas) first: the new version's DGD
  (`<workload>-<cluster>-r<n>`) comes up beside the old one at 0 % of that cluster's traffic;
- the gateway weight moves in the request's steps (default 10 → 50 → 100 %); each step dwells,
  and the gateway's counters of the two versions over the dwell are compared (`wingsmith.domain.upgrade.judge`);
- a cluster without room for both versions surges: the new version one replica at a time while
  the old one gives one back, each replica a step;
- past a threshold, or on `abort_upgrade`: weights back, every new DGD drained and removed, the
  old replicas restored, the figures in the events and in `UpgradeStatus.failures`;
- once every cluster serves the new version at 100 %: the old DGDs are drained and removed, the
  workload's plan becomes the new one (registry row and `WingsmithSha` too).

The workflow keeps observing (and healing) the old deployments meanwhile; the upgrade takes the
workflow's lock only for what changes them (surge, swap, restore), never for a dwell. Nothing a user
sends makes it retry forever: too little traffic to judge, or a gateway that cannot be read, pauses
it for a person (`resume_upgrade` goes on, `abort_upgrade` rolls back).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from contracts import conditions as reason
from contracts import upgrade as refusal
from contracts.ids import SHA, upgrade_id
from contracts.rollout import ClusterRolloutResult
from contracts.upgrade import (
    ACTIVITY_PLAN,
    ACTIVITY_READ_COUNTERS,
    ACTIVITY_RECORD,
    ACTIVITY_SET_SPLIT,
    CountersInput,
    CountersOutput,
    PlanUpgradeInput,
    PlanUpgradeOutput,
    SplitInput,
    UpgradeClusterProgress,
    UpgradeControl,
    UpgradeEvent,
    UpgradeRequest,
    UpgradeState,
    UpgradeStatus,
)
from contracts.workload import ACTIVITY_PLACE, ClusterState, ClusterTarget, PlaceInput
from wingsmith.domain.dynamo import dgd_name
from wingsmith.domain.endpoints import BackendRef
from wingsmith.domain.gateway.traffic import BackendCounters, BackendTraffic
from wingsmith.domain.placement.models import PlacementDecision
from wingsmith.domain.upgrade import judge, same_repository, steps_problem
from wingsmith.domain.workloads import WorkloadPlan
from workflows import policies
from workflows.workload.cluster_ops import ClusterOps, cause_of
from workflows.workload.state import Workload

# Windows a step collects traffic over before it decides on whatever came: light traffic is normal, so
# a step's requests add up across its windows (from its first reading) until they are enough to judge.
WINDOWS_TO_DECIDE = 10
Control = Literal["pause", "resume", "abort"]


class _Stop(Exception):
    """Ends the rollout: everything new is taken back, and the status says why."""

    def __init__(self, state: UpgradeState, failures: list[str]) -> None:
        super().__init__("; ".join(failures))
        self.state, self.failures = state, failures


class Upgrades:
    """What the workload workflow's upgrade handlers call: the running upgrade (if any), the one being
    planned, and the checks that refuse an update before anything reaches history."""

    def __init__(self, workload: Workload, ops: ClusterOps) -> None:
        self.workload, self.ops = workload, ops
        self.run: Upgrade | None = None  # the upgrade in flight
        self.pending: str | None = None  # an upgrade update being planned

    @property
    def busy(self) -> bool:
        """An upgrade runs or is being planned: the workload's replica count is not a scale's to change."""
        return self.run is not None or self.pending is not None

    def validate(self, request: UpgradeRequest) -> None:
        """The `upgrade` update's validator: refuses without touching state. The artifact's own checks
        (unknown, unapproved, superseded, does not fit) need the registry: the handler's plan does them."""
        wl = self.workload
        info = workflow.current_update_info()
        last = wl.state.upgrade
        if info is not None and last is not None and last.update_id == info.id:
            return  # the same update again (a retried `follow:` send): answered with its status
        stage = wl.state.stage
        if wl.deleting or stage in ("deleting", "deleted", "failed"):
            raise ApplicationError(f"workload is {'being deleted' if wl.deleting else stage}; it cannot be upgraded",
                                   type=refusal.NOT_SERVING)
        if last is not None and last.running:
            raise ApplicationError(f"an upgrade to {last.to_artifact_id} is already {last.state}; pause, resume or "
                                   "abort it, or wait for it to end", type=refusal.UPGRADE_RUNNING)
        if self.pending is not None:
            raise ApplicationError("another upgrade is being planned; wait for its answer",
                                   type=refusal.UPGRADE_RUNNING)
        if stage != "serving":
            raise ApplicationError(f"workload is {stage}, not serving: upgrade it once it serves",
                                   type=refusal.NOT_SERVING)
        if (problem := steps_problem(request.steps)) is not None:
            raise ApplicationError(problem, type=refusal.INVALID_STEPS)
        if not same_repository(request.artifact_id, wl.plan.artifact_id):
            raise ApplicationError(f"{request.artifact_id} is another repository than {wl.plan.artifact_id}: an "
                                   "upgrade moves a workload within its model", type=refusal.OTHER_REPOSITORY)
        if request.artifact_id.lower() == wl.plan.artifact_id.lower() and not request.changes_shape():
            raise ApplicationError(f"the workload already runs {wl.plan.artifact_id}", type=refusal.SAME_ARTIFACT)

    async def start(self, request: UpgradeRequest) -> UpgradeStatus:
        """Plan the new version, then start the rollout beside the observing and answer with its status."""
        wl = self.workload
        info = workflow.current_update_info()
        update = info.id if info is not None else None
        if wl.state.upgrade is not None and update is not None and wl.state.upgrade.update_id == update:
            return wl.state.upgrade
        self.validate(request)  # again: another update may have been accepted since this one's validator ran
        self.pending = update or "unnamed"
        try:
            try:
                planned = await workflow.execute_activity(
                    ACTIVITY_PLAN, PlanUpgradeInput(current=wl.plan, request=request),
                    result_type=PlanUpgradeOutput, **policies.UPGRADE_PLAN)
            except ActivityError as err:
                raise ApplicationError(f"the upgrade could not be planned: {cause_of(err)}",
                                       type=refusal.UPGRADE_NOT_PLANNED, non_retryable=True) from None
            if planned.plan is None:
                raise ApplicationError(planned.problem or "the upgrade was refused",
                                       type=planned.kind or refusal.NOT_UPGRADABLE, non_retryable=True)
            if wl.deleting or wl.state.stage != "serving":
                raise ApplicationError(f"workload is {wl.state.stage} now; it cannot be upgraded",
                                       type=refusal.NOT_SERVING)
            wl.state.upgrades += 1
            clusters = wl.state.clusters
            order = sorted((n for n, c in clusters.items() if c.state == "serving"),
                           key=lambda n: (-clusters[n].replicas, n))
            status = UpgradeStatus(
                upgrade_id=upgrade_id(wl.plan.workload_id, wl.state.upgrades), workload_id=wl.plan.workload_id,
                from_artifact_id=wl.plan.artifact_id, to_artifact_id=planned.plan.artifact_id, state="running",
                requested_by=request.requested_by, update_id=update, revision=planned.plan.revision,
                steps=list(request.steps), dwell_seconds=request.dwell_seconds, started_at=workflow.now(),
                clusters=[UpgradeClusterProgress(cluster=n, phase="waiting", replicas=clusters[n].replicas,
                                                 old_dgd=clusters[n].dgd_name) for n in order])
            run = Upgrade(self, request, planned.plan, status)
            wl.state.upgrade, self.run = status, run
            run.task = asyncio.create_task(run.run())
            return status
        finally:
            self.pending = None

    def validate_control(self, verb: Control) -> None:
        run = self.run
        if run is None:
            last = self.workload.state.upgrade
            raise ApplicationError(f"no upgrade is running (the last one {last.state})" if last else
                                   "no upgrade is running", type=refusal.NO_UPGRADE)
        if run.promoting and verb != "resume":
            raise ApplicationError(
                "the upgrade is past the point where it can be paused or aborted: every cluster serves the new "
                "version and the old one is being drained and removed; it ends by itself (upgrade again to go back)",
                type=refusal.UPGRADE_FINISHING)
        if verb == "pause" and run.paused:
            raise ApplicationError("the upgrade is already paused", type=refusal.ALREADY_PAUSED)
        if verb == "resume" and not run.paused:
            raise ApplicationError("the upgrade is not paused", type=refusal.NOT_PAUSED)

    def control(self, verb: Control, request: UpgradeControl) -> UpgradeStatus:
        self.validate_control(verb)
        run = self.run
        assert run is not None
        why = f" ({request.reason})" if request.reason else ""
        if verb == "pause":
            run.pause(f"paused by {request.requested_by}{why}")
        elif verb == "resume":
            run.resume(request.requested_by)
        else:
            run.aborting = f"aborted by {request.requested_by}{why}"
        return run.status

    async def end_before_delete(self) -> None:
        """A delete aborts a running upgrade and waits for its rollback before the teardown starts."""
        if self.run is not None:
            self.run.aborting = self.run.aborting or "the workload is being deleted"
            await workflow.wait_condition(lambda: self.run is None)


# --- the rollout ---------------------------------------------------------------------------------------

class Upgrade:
    """One upgrade in flight: its status is also the workload's `state.upgrade` (carried across
    continue-as-new, which waits for it to end)."""

    def __init__(self, upgrades: Upgrades, request: UpgradeRequest, plan: WorkloadPlan,
                 status: UpgradeStatus) -> None:
        self.upgrades, self.request, self.plan, self.status = upgrades, request, plan, status
        self.workload, self.ops = upgrades.workload, upgrades.ops
        self.number = self.workload.state.upgrades
        self.order = [c.cluster for c in status.clusters]
        self.targets: dict[str, ClusterTarget] = {}
        self.touched: list[str] = []
        self.new: dict[str, ClusterRolloutResult] = {}
        self.baseline: dict[str, BackendTraffic] = {}  # the old version's last judged window per cluster
        self.paused = False
        self.aborting: str | None = None
        # Draining the old version: too late to take the new one back (an abort would be ignored).
        self.promoting = False
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        s, evicted = self.status, False
        self._event(reason.UPGRADE_STARTED, f"started by {s.requested_by}: {s.from_artifact_id} → {s.to_artifact_id}, "
                    f"steps {'/'.join(map(str, s.steps))} %, dwell {s.dwell_seconds:g} s, clusters "
                    f"{', '.join(self.order)}", to=s.to_artifact_id, steps=list(s.steps), clusters=list(self.order))
        await self._record("workload_upgrade_started", "started", {
            "from": s.from_artifact_id, "to": s.to_artifact_id, "steps": s.steps, "dwell_seconds": s.dwell_seconds,
            "clusters": self.order, "reason": self.request.reason})
        try:
            self.targets = await self.ops.targets()
            for name in self.order:
                await self._upgrade_cluster(name)
            await self._promote()
        except _Stop as stop:
            await self._roll_back_or_say_why(stop)
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, two versions must not stay routed
            await self._roll_back_or_say_why(_Stop("failed", [f"{type(exc).__name__}: {exc}"]))
        except GeneratorExit:
            # The worker evicted this run from its cache and closes its coroutines: no workflow call
            # may run now, and none is needed (the run is replayed from its history elsewhere).
            evicted = True
            raise
        finally:
            if not evicted:
                self._finish()

    def _finish(self) -> None:
        s = self.status
        if s.running:  # never left "running" with nothing running: a new upgrade could not start
            s.state = "failed"
        s.finished_at = workflow.now()
        self.upgrades.run = None
        self.workload.surged.clear()
        self.workload.show_conditions()
        workflow.set_current_details("")

    # --- one cluster --------------------------------------------------------------------------------

    async def _upgrade_cluster(self, name: str) -> None:
        p = self.status.cluster(name)
        target = self._target(name)
        self.touched.append(name)
        await self._split(name, 0)  # the new version joins its endpoints at 0 % until the first step
        p.surge = not await self._room(target, p.replicas)
        if p.surge and not await self._room(target, 1):
            raise _Stop("failed", [f"{name} has no room for even one more replica of the new version; free "
                                   "capacity there (or scale the workload down) and upgrade again"])
        canary = " (canary)" if name == self.order[0] else ""
        if not p.surge:
            p.phase = "bringing up" + canary
            await self._bring_up(target, p.replicas)
            for i, percent in enumerate(self.request.steps, 1):
                await self._step(name, percent, f"step {i} of {len(self.request.steps)}{canary}")
        else:
            self._event(reason.UPGRADE_SURGING, f"{name} cannot hold both versions: one replica at a time",
                        cluster=name)
            for k in range(1, p.replicas + 1):
                p.phase = f"surging: replica {k} of {p.replicas}{canary}"
                await self._bring_up(target, k)
                if k < p.replicas:
                    await self._scale_old(target, p.replicas - k)
                await self._step(name, 100 * k // p.replicas, f"replica {k} of {p.replicas}{canary}")
        p.phase = "all traffic on the new version" + ("; waiting for the other clusters" if name != self.order[-1]
                                                      else "")

    async def _room(self, target: ClusterTarget, replicas: int) -> bool:
        """Whether the cluster can hold `replicas` more of the new version beside what runs there."""
        name = target.info.name
        inventory = await self.ops.inventory(target)
        constraints = self.plan.placement.constraints.model_copy(update={
            "allowed_clusters": [name], "denied_clusters": [], "max_replicas_per_cluster": None})
        plan = self.plan.placement.model_copy(update={"replicas": replicas, "constraints": constraints})
        decision = await workflow.execute_local_activity(
            ACTIVITY_PLACE, PlaceInput(plan=plan, inventories=[inventory], clusters=[target.info]),
            result_type=PlacementDecision, **policies.PLACE)
        return decision.placed >= replicas

    async def _bring_up(self, target: ClusterTarget, replicas: int) -> None:
        name = target.info.name
        p = self.status.cluster(name)
        p.new_dgd = dgd_name(self.plan.workload_id, name, self.plan.revision)
        # An abort (or a delete) does not wait for a version that may take long to come up: the rollout
        # child is cancelled, and the rollback removes whatever it applied.
        child = asyncio.ensure_future(self.ops.rollout(target, replicas, "apply", plan=self.plan))
        await workflow.wait_condition(lambda: child.done() or self._ending() is not None)
        if not child.done():
            child.cancel()
            try:
                await child
            except (asyncio.CancelledError, ChildWorkflowError):
                pass
            raise _Stop("aborted", [self._ending() or "aborted"])
        try:
            self.new[name] = child.result()
        except ChildWorkflowError as err:
            raise _Stop("rolled_back", [f"{name}: the new version did not come up: {cause_of(err)}"]) from None
        self._event(reason.UPGRADE_NEW_VERSION_SERVING, f"{name}: the new version serves {replicas} replica(s) at "
                    f"{self.new[name].frontend_url}", cluster=name, replicas=replicas)

    async def _scale_old(self, target: ClusterTarget, replicas: int) -> None:
        name = target.info.name
        async with self.workload.lock:
            self.workload.surged[name] = self.status.cluster(name).replicas - replicas
            _, lost = await self.ops.roll_out(target, replicas)
        if lost:
            raise _Stop("rolled_back", [f"{name}: the old version could not be scaled to {replicas} replica(s)"])

    async def _step(self, name: str, percent: int, label: str) -> None:
        p = self.status.cluster(name)
        p.phase, p.new_weight_percent = label, percent
        workflow.set_current_details(f"upgrade {self.number} to {self.status.to_artifact_id}: {name} {label}, "
                                     f"{percent} % on the new version")
        await self._split(name, percent)
        self._event(reason.UPGRADE_STEP, f"{name} {label}: {percent} % of its traffic on the new version",
                    cluster=name, percent=percent)
        endpoints = [wid.removeprefix("endpoint/") for wid in self.workload.state.subscribers]
        windows, start = 0, None
        p.decides_by = workflow.now() + timedelta(seconds=WINDOWS_TO_DECIDE * self.request.dwell_seconds)
        while True:
            if not endpoints:
                await self._dwell()
                self._event(reason.UPGRADE_NO_TRAFFIC, f"{name}: no endpoint routes this workload, so there is no "
                            "traffic to compare", cluster=name)
                break
            before = await self._counters(name, endpoints)
            if before is None:
                continue  # the gateway could not be read: a person resumed; count again
            if start is None or any(b.requests < s.requests for b, s in zip(before, start, strict=True)):
                start = before  # the step's first reading, or the gateway restarted and its counters began again
            await self._dwell()
            after = await self._counters(name, endpoints)
            if after is None:
                continue
            last = windows + 1 >= WINDOWS_TO_DECIDE
            if await self._judged(name, percent, windows, start, after, last=last):
                break
            windows += 1
            if last:
                await self._hold(f"{name} at {percent} %: no request reached the new version in {windows} windows "
                                 f"({windows * self.request.dwell_seconds:g} s); resume to go on, abort to roll back")
                break
        p.decides_by = None
        await self._wait_while_paused()

    async def _judged(self, name: str, percent: int, window: int, before: tuple[BackendCounters, BackendCounters],
                      after: tuple[BackendCounters, BackendCounters], *, last: bool = False) -> bool:
        """Compare the step's traffic so far; raise to roll back; True when the step has its verdict. At the
        `last` window any request to the new version decides: too few to judge latencies, but its errors
        were judged, and light traffic must not stall an upgrade."""
        t = self.request.thresholds
        old, new = after[0].since(before[0]), after[1].since(before[1])
        if old.attempts >= t.min_requests:
            self.baseline[name] = old
        elif name in self.baseline:  # at 100 % the old version gets nothing: compare with its last window
            old = self.baseline[name]
        verdict = judge(old, new, t)
        self.status.cluster(name).verdict = verdict
        await self._record("workload_upgrade_step", f"{name}:{percent}:{window}", {
            "cluster": name, "percent": percent, "healthy": verdict.healthy, "enough_traffic": verdict.enough_traffic,
            "figures": verdict.figures, "failures": verdict.failures})
        f = verdict.figures
        self._event(reason.UPGRADE_JUDGED, f"{name} at {percent} %: new {f['new_requests']} requests, error rate "
                    f"{f['new_error_rate']}, p99 {_ms(f['new_p99_seconds'])}; old {f['old_requests']}, "
                    f"{f['old_error_rate']}, p99 {_ms(f['old_p99_seconds'])}", cluster=name, percent=percent,
                    healthy=verdict.healthy, figures=dict(f))
        if not verdict.healthy:
            raise _Stop("rolled_back", [f"{name} at {percent} %: {failure}" for failure in verdict.failures])
        if last and not verdict.enough_traffic and new.attempts:
            self._event(reason.UPGRADE_JUDGED, f"{name} at {percent} %: decided on {new.attempts} request(s) to the "
                        f"new version in {window + 1} windows (fewer than {t.min_requests}: errors judged, latencies "
                        "not)", cluster=name, percent=percent, healthy=True, figures=dict(f))
            return True
        return verdict.enough_traffic

    async def _counters(self, name: str, endpoints: list[str]) -> tuple[BackendCounters, BackendCounters] | None:
        old, new = self._ref(name, self.workload.plan.revision).id, self._ref(name, self.plan.revision).id
        try:
            read = await workflow.execute_activity(
                ACTIVITY_READ_COUNTERS, CountersInput(endpoints=endpoints, backends=[old, new]),
                result_type=CountersOutput, **policies.GATEWAY_COUNTERS)
        except ActivityError as err:
            await self._hold(f"the gateway's counters could not be read ({cause_of(err)}); resume to try again, "
                             "abort to roll back")
            return None
        return read.counters[old], read.counters[new]

    # --- pause, resume, abort ---------------------------------------------------------------------------

    def pause(self, why: str) -> None:
        self.paused = True
        self.status.state, self.status.paused_reason = "paused", why
        self._event(reason.UPGRADE_PAUSED, why + "; it stops after the current step", why=why)

    def resume(self, by: str) -> None:
        self.paused = False
        self.status.state, self.status.paused_reason = "running", None
        self._event(reason.UPGRADE_RESUMED, f"resumed by {by}", by=by)

    async def _hold(self, why: str) -> None:
        self.pause(why)
        await self._record("workload_upgrade_paused", f"held:{workflow.info().get_current_history_length()}",
                           {"reason": why})
        await self._wait_while_paused()

    async def _wait_while_paused(self) -> None:
        await workflow.wait_condition(lambda: not self.paused or self._ending() is not None)
        if (why := self._ending()) is not None:
            raise _Stop("aborted", [why])

    async def _dwell(self) -> None:
        if self.request.dwell_seconds > 0:
            try:
                await workflow.wait_condition(lambda: self._ending() is not None,
                                              timeout=timedelta(seconds=self.request.dwell_seconds))
            except TimeoutError:
                pass
        if (why := self._ending()) is not None:
            raise _Stop("aborted", [why])

    def _ending(self) -> str | None:
        if self.aborting is None and self.workload.deleting:
            self.aborting = "the workload is being deleted"
        return self.aborting

    # --- the end: promote, or take everything back ------------------------------------------------------

    async def _promote(self) -> None:
        """Every cluster serves the new version at 100 %: drain and remove the old DGDs, and the
        workload's plan becomes the new one."""
        wl, ops = self.workload, self.ops
        async with wl.lock:
            changed = sorted(set(self.order) ^ {n for n, c in wl.state.clusters.items() if c.state == "serving"})
            if changed:
                raise _Stop("rolled_back", [f"the workload's clusters changed during the upgrade "
                                            f"({', '.join(changed)}: healed or moved by the watch); upgrade again"])
            self.promoting = True
            for name in self.order:
                p = self.status.cluster(name)
                p.phase = "draining the old version"
                old_ref = ops.backend(name)
                await ops.drain_clusters([name])
                try:
                    await ops.rollout(self._target(name), 0, "delete")
                except ChildWorkflowError as err:
                    wl.event(reason.UPGRADE_DEPLOYMENT_LEFT, f"{name}: the old deployment could not be removed "
                             f"({cause_of(err)}); it is left there", cluster=name, cause=cause_of(err))
                new = self.new[name]
                wl.state.clusters[name] = ClusterState(
                    cluster=name, replicas=new.replicas, state="serving", dgd_name=new.dgd_name,
                    revision=self.plan.revision, frontend_url=new.frontend_url, generation=new.generation,
                    spec_hash=new.spec_hash)
                wl.surged.pop(name, None)
                await self._split(name, None)
                await ops.backend_gone(old_ref)
                p.phase = "done"
            wl.plan = self.plan
            workflow.upsert_search_attributes([SHA.value_set(self.plan.artifact_sha)])
            self.status.state = "succeeded"
            self._event(reason.UPGRADE_SUCCEEDED, f"succeeded: the workload runs {self.plan.artifact_id}",
                        to=self.plan.artifact_id)
            await wl.record(wl.state.stage, f"upgraded:{self.number}", {
                "from": self.status.from_artifact_id, "to": self.plan.artifact_id, "revision": self.plan.revision})
            await self._record("workload_upgrade_succeeded", "succeeded", {
                "from": self.status.from_artifact_id, "to": self.plan.artifact_id, "clusters": self.order})

    async def _roll_back_or_say_why(self, stop: _Stop) -> None:
        try:
            await self._roll_back(stop)
        except Exception as exc:  # noqa: BLE001 - said in the status and the events; the watch heals the rest
            self.status.state = "failed"
            self.status.failures = [*stop.failures, f"the rollback did not finish ({type(exc).__name__}: {exc}); "
                                                    "check the clusters' graphs"]
            self._event(reason.UPGRADE_ROLLBACK_INCOMPLETE, self.status.failures[-1])

    async def _roll_back(self, stop: _Stop) -> None:
        """Weights back, the new DGDs drained and removed, surged replicas restored; the figures stay."""
        wl, ops = self.workload, self.ops
        self._event(reason.UPGRADE_ABORTED if stop.state == "aborted" else reason.UPGRADE_ROLLING_BACK,
                    f"{'aborted' if stop.state == 'aborted' else 'rolling back'}: {'; '.join(stop.failures)}",
                    failures=list(stop.failures))
        for name in reversed(self.touched):
            p = self.status.cluster(name)
            p.phase, p.new_weight_percent = "rolling back", 0
            target = self._target(name)
            await self._split(name, 0)
            new_ref = self._ref(name, self.plan.revision)
            await ops.drain_backends([new_ref], name)
            try:
                await ops.rollout(target, 0, "delete", plan=self.plan)
            except ChildWorkflowError as err:
                wl.event(reason.UPGRADE_DEPLOYMENT_LEFT, f"{name}: the new deployment could not be removed "
                         f"({cause_of(err)}); it is left there", cluster=name, cause=cause_of(err))
            if name in wl.surged:
                async with wl.lock:
                    await ops.roll_out(target, p.replicas)
                del wl.surged[name]
            await self._split(name, None)
            await ops.backend_gone(new_ref)
            p.phase = "rolled back"
        self.status.state, self.status.failures, self.status.paused_reason = stop.state, stop.failures, None
        await self._record(f"workload_upgrade_{stop.state}", stop.state, {
            "from": self.status.from_artifact_id, "to": self.status.to_artifact_id, "failures": stop.failures,
            "figures": {c.cluster: c.verdict.figures for c in self.status.clusters if c.verdict is not None}})

    # --- helpers ---------------------------------------------------------------------------------------

    def _target(self, name: str) -> ClusterTarget:
        if name not in self.targets:
            raise _Stop("failed", [f"{name} is no longer registered"])
        return self.targets[name]

    def _ref(self, name: str, revision: int) -> BackendRef:
        return BackendRef(cluster=name, workload_id=self.plan.workload_id, revision=revision)

    async def _split(self, name: str, percent: int | None) -> None:
        await workflow.execute_local_activity(ACTIVITY_SET_SPLIT, SplitInput(
            workload_id=self.plan.workload_id, cluster=name, revision=self.plan.revision, percent=percent),
            **policies.REGISTRY)
        await self.ops.notify_subscribers()

    async def _record(self, kind: str, step: str, detail: dict[str, Any]) -> None:
        await workflow.execute_local_activity(ACTIVITY_RECORD, UpgradeEvent(
            workload_id=self.plan.workload_id, source=workflow.info().workflow_id,
            step=f"upgrade:{self.number}:{step}", kind=kind, actor=self.status.requested_by,
            detail={"upgrade_id": self.status.upgrade_id, **detail}), **policies.REGISTRY)

    def _event(self, kind: str, text: str, **detail: Any) -> None:
        self.workload.event(kind, f"upgrade {self.number}: {text}", upgrade=self.number, **detail)


def _ms(seconds: float | int | None) -> str:
    return "n/a" if seconds is None else f"{float(seconds) * 1000:.0f} ms"

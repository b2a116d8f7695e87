"""Healing: acting on what an observation saw, by the verdict of `wingsmith.domain.reconcile.judge`. A missing or
edited deployment is applied again; one that stays unready or unreachable past the grace is drained and
its replicas placed elsewhere (its old DGD is removed once its cluster answers again); replicas that
could not be placed are placed again, backing off. Stage, conditions and registry say what was
observed (`degraded`, with the cluster and the cause). The caller holds the lock."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

from contracts import conditions as reason
from contracts.rollout import ACTIVITY_RECORD_DEPLOYMENT, DeploymentRecord
from contracts.workload import ACTIVITY_RECORD_HEAL, ClusterState, ClusterTarget, HealRecord, Stage
from wingsmith.domain.dynamo import dgd_name
from wingsmith.domain.reconcile import Applied, Observation, Verdict, judge
from workflows import policies
from workflows.workload.cluster_ops import ClusterOps, cause_of
from workflows.workload.converge import Converger, Unplaceable
from workflows.workload.state import HOLDING, Workload

# Replicas a heal could not place again are tried again, backing off up to this.
_PLACE_AGAIN_MAX = timedelta(minutes=10)


class Healer:
    def __init__(self, workload: Workload, ops: ClusterOps, converger: Converger) -> None:
        self.workload, self.ops, self.converger = workload, ops, converger
        self.place_again_wait = timedelta(0)
        self.placing_timer: asyncio.Task[None] | None = None  # placing again is due when it fires
        self.placing_due = False

    async def act_on(self, target: ClusterTarget, seen: Observation) -> None:
        wl = self.workload
        state = wl.state.clusters.get(target.info.name)
        if state is None or state.state not in HOLDING:
            return  # changed by an earlier heal of this round of news
        if state.spec_hash is None and seen.exists:  # applied before the plane recorded what it applied
            state.spec_hash, state.generation = seen.spec_hash, seen.generation
        applied = Applied(cluster=state.cluster, dgd_name=state.dgd_name or dgd_name(wl.plan.workload_id,
                                                                                      state.cluster, state.revision),
                          namespace=wl.plan.namespace, spec_hash=state.spec_hash or "",
                          generation=state.generation, replicas=state.replicas,
                          served_model_name=wl.plan.served_model_name)
        verdict = judge(applied, seen, unhealthy_since=state.unhealthy_since, policy=wl.plan.drift,
                        grace=timedelta(seconds=wl.params.watch.grace_seconds))
        if verdict.action in ("ok", "report"):
            await self._healthy(state, seen.at, drift=verdict.cause if verdict.action == "report" else None)
        else:
            await self._degrade(state, verdict, seen)
            if verdict.action == "reapply":
                await self._reapply(target, state, verdict)
            elif verdict.action == "replace":
                await self._replace(target, state, verdict)

    async def place_if_short(self) -> None:
        """Short of the target (a heal or the first placement could not place everything): placement is
        asked again, backing off, until inventories change."""
        wl = self.workload
        if self.placing_due:
            self.placing_due, self.placing_timer = False, None
            if wl.held() < wl.plan.replicas:
                await self._place_again("replicas short of the target")
        elif wl.held() < wl.plan.replicas and self.placing_timer is None:
            self._back_off_placing()

    async def remove_leftover(self, target: ClusterTarget, seen: Observation) -> None:
        """A cluster given up on answers again: its old deployment goes, so the workload never holds
        more than its target, and the cluster may take replicas again."""
        wl, name = self.workload, target.info.name
        if not seen.reachable:
            return
        if seen.exists:
            try:
                await self.ops.rollout(target, 0, "delete")
            except ChildWorkflowError as err:
                wl.event(reason.LEFTOVER_NOT_REMOVED, f"{name} answers again, but its old deployment could not be "
                         f"removed yet: {cause_of(err)}", cluster=name, cause=cause_of(err))
                return
        wl.state.leftovers.remove(name)
        if name in wl.state.excluded:
            wl.state.excluded.remove(name)
        if name in wl.state.clusters and wl.state.clusters[name].state == "failed":
            del wl.state.clusters[name]
            wl.update_search_attributes()
        wl.event(reason.CLUSTER_ANSWERS_AGAIN, f"{name} answers again: " + (
            "its old deployment was removed" if seen.exists else "it holds no deployment of this workload"),
            cluster=name, removed=seen.exists)

    async def show_observed(self) -> None:
        """Stage and registry say what the last observations saw: `degraded` names each cluster and its
        cause, or the replicas missing; never `serving` over nothing."""
        wl = self.workload
        problems = {n: c.error or "degraded" for n, c in sorted(wl.state.clusters.items()) if c.state == "degraded"}
        missing = wl.plan.replicas - wl.replicas() - wl.standing_in()
        stage: Stage = "degraded" if problems or missing > 0 else "serving"
        if stage == wl.state.stage:
            return
        wl.set_stage(stage)
        detail: dict[str, Any] = {"clusters": problems} if problems else wl.summary()
        if stage == "degraded" and missing > 0:
            detail["missing_replicas"] = missing
        length = workflow.info().get_current_history_length()
        await wl.record(stage, f"{stage}:{wl.state.heals}:{length}", detail)

    def stop_placing_timer(self) -> None:
        if self.placing_timer is not None:
            self.placing_timer.cancel()
        self.placing_timer, self.placing_due = None, False

    # --- what a verdict asks for ------------------------------------------------------------------------

    async def _healthy(self, state: ClusterState, at: datetime, *, drift: str | None = None) -> None:
        """Serving (a look at `at` found it so); under `drift: report` possibly with an edit left in place,
        said once, not every time."""
        wl = self.workload
        state.last_ok_at = at if state.last_ok_at is None else max(state.last_ok_at, at)
        if state.drift != drift:
            if drift:
                wl.event(reason.DRIFT_LEFT_IN_PLACE, f"{state.cluster}: {drift} (left in place: drift policy is "
                         "report)", cluster=state.cluster, drift=drift)
            else:
                wl.event(reason.DRIFT_GONE, f"{state.cluster}: the edit outside the plane is gone",
                         cluster=state.cluster)
            state.drift = drift
        if state.state == "degraded":
            now = workflow.now()
            since = state.unhealthy_since or now
            took = _seconds(now - since)
            wl.event(reason.RECOVERED, f"{state.cluster} serving again by itself after {took} s (was: {state.error}); "
                     f"{_from_fault(now, since, state.fault_at, state.fault_after)}", cluster=state.cluster,
                     seconds=took, was=state.error, fault_at=state.fault_at.isoformat() if state.fault_at else None,
                     fault_after=state.fault_after.isoformat() if state.fault_after else None)
            state.state, state.error = "serving", None
            await self._record_deployment(state, "serving")
            await self.ops.notify_subscribers()
        state.unhealthy_since = state.fault_at = state.fault_after = None

    async def _degrade(self, state: ClusterState, verdict: Verdict, seen: Observation) -> None:
        """Not serving is shown at once: the registry, the stage and the endpoints (which stop routing
        there) hear of it before any heal starts."""
        if state.unhealthy_since is None:  # the fault's own time, from the first look that saw it
            # Only a delete or an edit is stamped by the cluster; a vanished object says nothing.
            stamped = seen.exists and verdict.problem in ("DeploymentDeleting", "SpecEdited")
            state.fault_at = seen.changed_at if stamped else None
            # Unstamped (the object gone, the frontend silent): it happened between the last look that
            # found it well and this one.
            state.fault_after = None if state.fault_at else _not_after(state.last_ok_at, verdict.unhealthy_since)
        state.unhealthy_since = verdict.unhealthy_since
        if state.state == "degraded" and state.error == verdict.cause:
            return
        was = state.state
        state.state, state.error = "degraded", verdict.cause
        self.workload.event(reason.CLUSTER_DEGRADED_EVENT, f"{state.cluster} degraded: {verdict.cause}",
                            cluster=state.cluster, problem=verdict.problem, cause=verdict.cause)
        await self.show_observed()  # the stage flips with the cluster, before any registry write
        await self._record_deployment(state, "degraded", {"cause": verdict.cause})
        if was == "serving":
            await self.ops.notify_subscribers()

    async def _reapply(self, target: ClusterTarget, state: ClusterState, verdict: Verdict) -> None:
        """A missing or edited deployment is rolled out again, as applied, through a rollout child."""
        wl = self.workload
        name, since = state.cluster, verdict.unhealthy_since or workflow.now()
        fault = (state.fault_at, state.fault_after)
        wl.state.heals += 1
        _, lost = await self.ops.roll_out(target, state.replicas)
        if not lost:
            await self._healed(name, "reapply", verdict, since, "serving again", *fault)
            return
        failed = self.ops.failures.get(name)
        placed = await self._place_again(f"{name} could not be healed in place")
        elsewhere = "its replicas were placed elsewhere" if placed else "its replicas could not be placed elsewhere yet"
        await self._healed(name, "reapply", verdict, since, f"could not be applied again ({failed}); {elsewhere}",
                           *fault)

    async def _replace(self, target: ClusterTarget, state: ClusterState, verdict: Verdict) -> None:
        """Past the grace: endpoints stop routing there, its replicas go elsewhere, and its deployment is
        removed as soon as the cluster answers (it may be unreachable now)."""
        wl = self.workload
        name, since = state.cluster, verdict.unhealthy_since or workflow.now()
        wl.state.heals += 1
        await self.ops.drain_clusters([name])
        state.state = "failed"
        for bucket in (wl.state.excluded, wl.state.leftovers):
            if name not in bucket:
                bucket.append(name)
        await self._record_deployment(state, "failed", {"cause": verdict.cause})
        await self.ops.backend_gone(self.ops.backend(name))
        placed = await self._place_again(f"{name} given up on")
        outcome = "its replicas serve elsewhere" if placed else "its replicas could not be placed elsewhere yet"
        await self._healed(name, "replace", verdict, since, outcome, state.fault_at, state.fault_after)

    async def _place_again(self, why: str) -> bool:
        """Place what is missing of the target replica count; on failure retry later, backing off."""
        wl = self.workload
        try:
            await self.converger.converge(wl.plan.replicas, initial=False)
        except Unplaceable as exc:
            self._back_off_placing()
            wl.event(reason.PLACEMENT_RETRY, f"{why}: replicas could not be placed ({exc}); trying again in "
                     f"{_seconds(self.place_again_wait)} s", why=why, seconds=_seconds(self.place_again_wait))
            return False
        if wl.held() < wl.plan.replicas:
            self._back_off_placing()
            return False
        self.stop_placing_timer()
        self.place_again_wait = timedelta(0)
        return True

    def _back_off_placing(self) -> None:
        """Placing again is due after the next back-off: a timer, so the decision replays exactly."""
        first = timedelta(seconds=self.workload.params.watch.place_again_seconds)
        self.place_again_wait = min(max(2 * self.place_again_wait, first), max(first, _PLACE_AGAIN_MAX))
        self.stop_placing_timer()
        self.placing_timer = asyncio.create_task(self._placing_after(self.place_again_wait))

    async def _placing_after(self, wait: timedelta) -> None:
        await workflow.sleep(wait)
        self.placing_due = True

    async def _healed(self, cluster: str, action: str, verdict: Verdict, since: datetime, outcome: str,
                      fault_at: datetime | None = None, fault_after: datetime | None = None) -> None:
        """`since`: when the plane saw the fault; `fault_at`: when the cluster says it happened, if it can;
        else `fault_after`: the last look that found it well, so the fault came between that and `since`."""
        wl = self.workload
        now = workflow.now()
        took = _seconds(now - since)
        wl.event(reason.HEALED, f"healed {cluster} ({action}: {verdict.cause}): {outcome} {took} s from when it was "
                 f"seen; {_from_fault(now, since, fault_at, fault_after)}", cluster=cluster, action=action,
                 cause=verdict.cause, outcome=outcome, seconds=took,
                 fault_at=fault_at.isoformat() if fault_at else None,
                 fault_after=fault_after.isoformat() if fault_after else None, seen_at=since.isoformat(),
                 served_at=now.isoformat(), seconds_from_fault=_seconds(now - fault_at) if fault_at else None,
                 seconds_from_fault_at_most=_seconds(now - fault_after) if fault_after else None)
        info = workflow.info()
        await workflow.execute_activity(ACTIVITY_RECORD_HEAL, HealRecord(
            workload_id=wl.plan.workload_id, workflow_id=info.workflow_id, step=f"heal:{wl.state.heals}",
            cluster=cluster, action=action, problem=verdict.problem or "other", cause=verdict.cause or "",
            seconds=took, outcome=outcome, fault_at=fault_at, fault_after=fault_after, seen_at=since, served_at=now),
            **policies.REGISTRY_SCHEDULED)

    async def _record_deployment(self, state: ClusterState, phase: str, detail: dict[str, Any] | None = None) -> None:
        wl = self.workload
        info = workflow.info()
        await workflow.execute_activity(ACTIVITY_RECORD_DEPLOYMENT, DeploymentRecord(
            workload_id=wl.plan.workload_id, cluster=state.cluster, revision=state.revision,
            dgd_name=state.dgd_name or dgd_name(wl.plan.workload_id, state.cluster, state.revision),
            namespace=wl.plan.namespace,
            replicas=state.replicas, state=phase, frontend_url=state.frontend_url,
            detail={"generation": state.generation, **(detail or {})}, source=info.workflow_id,
            step=f"{info.run_id}:watch:{state.cluster}:{phase}:{info.get_current_history_length()}"),
            **policies.REGISTRY_SCHEDULED)


def _seconds(delta: timedelta) -> float:
    return round(delta.total_seconds(), 1)


def _not_after(last_ok: datetime | None, seen: datetime | None) -> datetime | None:
    """The last look that found a cluster well, no later than the one that saw it wrong (two clocks)."""
    return min(last_ok, seen) if last_ok and seen else last_ok


def _from_fault(now: datetime, seen: datetime, fault_at: datetime | None, fault_after: datetime | None) -> str:
    """A heal's time from the fault itself: exact when the cluster stamped it, at most the time since the
    last look that found it well when it did not (a DGD that vanished leaves no trace of when)."""
    if fault_at:
        return f"{_seconds(now - fault_at)} s from the fault ({fault_at:%H:%M:%S} UTC, the cluster's own time for it)"
    if fault_after:
        return (f"from the fault at most {_seconds(now - fault_after)} s (it happened between {fault_after:%H:%M:%S} "
                f"UTC, the last look that found it well, and {seen:%H:%M:%S} UTC)")
    return "the fault's own time is unknown (no look had found it well)"

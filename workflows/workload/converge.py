"""Converging on a replica count: place what is missing (the first placement canary first), remove what
is too much (drained first), and place again what a failed cluster held. The caller holds the lock."""

from __future__ import annotations

import asyncio

from temporalio import workflow

from contracts import conditions as reason
from contracts.workload import ACTIVITY_PLACE, ACTIVITY_RECORD_PLACEMENT, ClusterState, PlaceInput, PlacementRecord
from wingsmith.domain.placement.models import ClusterInventory, PlacementDecision
from workflows import policies
from workflows.workload.cluster_ops import ClusterOps
from workflows.workload.state import HOLDING, Workload


async def _not_read(cluster: str) -> ClusterInventory:
    """A denied cluster's place among the inventories: nothing read, so placement explains it by its denial."""
    return ClusterInventory(cluster=cluster)


class Unplaceable(Exception):
    """No replica (or, on the first placement, not all of them) could be placed."""


class Converger:
    def __init__(self, workload: Workload, ops: ClusterOps) -> None:
        self.workload, self.ops = workload, ops

    async def converge(self, target: int, *, initial: bool) -> None:
        """Place or remove replicas until `target` serve, re-placing what a failed cluster held."""
        wl = self.workload
        self.ops.unscaled.clear()  # a scaling that failed before is asked again
        current = wl.held()
        if target < current:
            desired = self._shrink(target)
            leaving = sorted(name for name, n in desired.items() if n == 0)
            if leaving:
                await self.ops.drain_clusters(leaving)
            await self._apply(desired)
            for name in leaving:
                await self.ops.backend_gone(self.ops.backend(name))
            return
        missing = target - current
        canary = initial
        while missing > 0:
            wl.set_stage("placing")
            desired = await self._place(missing)
            wl.set_stage("rolling_out")
            failed = await self._apply(desired, canary=canary)
            canary = False
            missing = sum(failed.values())

    def _shrink(self, target: int) -> dict[str, int]:
        """Take replicas away from the clusters holding the most (ties: the last by name) first."""
        desired = {name: c.replicas for name, c in self.workload.state.clusters.items() if c.state in HOLDING}
        while sum(desired.values()) > target:
            name = max(desired, key=lambda n: (desired[n], n))
            desired[name] -= 1
        return desired

    async def _place(self, replicas: int) -> dict[str, int]:
        wl = self.workload
        targets = await self.ops.targets()
        c = wl.plan.placement.constraints
        # A cluster whose scaling just failed still serves, but takes no more replicas this time: asked at
        # once again it would fail again (a heal places them later, backing off).
        denied = sorted(set(c.denied_clusters) | set(wl.state.excluded) | self.ops.unscaled)
        # A denied cluster takes no replicas whatever its nodes, so its inventory is not read: one given up on
        # is often unreachable, and reading it cost the whole retry budget (~20 s) per placement.
        skipped = set(denied)
        inventories = await asyncio.gather(*(self.ops.inventory(t) if name not in skipped else _not_read(name)
                                             for name, t in targets.items()))
        constraints = c.model_copy(update={"denied_clusters": denied})
        plan = wl.plan.placement.model_copy(update={"replicas": replicas, "constraints": constraints})
        decision = await workflow.execute_local_activity(
            ACTIVITY_PLACE, PlaceInput(plan=plan, inventories=list(inventories),
                                       clusters=[t.info for t in targets.values()]),
            result_type=PlacementDecision, **policies.PLACE)
        wl.state.placement_revision += 1
        await workflow.execute_local_activity(ACTIVITY_RECORD_PLACEMENT, PlacementRecord(
            workload_id=wl.plan.workload_id, revision=wl.state.placement_revision, decision=decision,
            workflow_id=workflow.info().workflow_id), **policies.REGISTRY)
        wl.event(reason.PLACED, f"placement {wl.state.placement_revision}: {decision.summary}",
                 revision=wl.state.placement_revision, placed=decision.placed, unplaced=decision.unplaced,
                 replicas=dict(decision.replicas))
        if decision.placed == 0:
            raise Unplaceable(decision.summary)
        if not decision.complete and not wl.state.clusters and not wl.state.excluded:  # the very first placement
            raise Unplaceable(decision.summary)
        desired = {name: c.replicas for name, c in wl.state.clusters.items() if c.state == "serving"}
        for name, count in decision.replicas.items():
            desired[name] = desired.get(name, 0) + count
        if not decision.complete:
            wl.event(reason.REPLICAS_UNPLACED, f"{decision.unplaced} replica(s) could not be placed: "
                     f"{decision.summary}", unplaced=decision.unplaced)
        return desired

    async def _apply(self, desired: dict[str, int], canary: bool = False) -> dict[str, int]:
        """Roll out every cluster whose replica count changes. Returns replicas lost to failed clusters."""
        wl = self.workload
        changes = {name: n for name, n in desired.items()
                   if n != wl.state.clusters.get(name, ClusterState(cluster=name)).replicas
                   or wl.state.clusters.get(name, ClusterState(cluster=name)).state != "serving"}
        if not changes:
            return {}
        order = sorted(changes, key=lambda n: (-changes[n], n))
        targets = await self.ops.targets()
        failed: dict[str, int] = {}
        batches = [order[:1], order[1:]] if canary else [order]
        for batch in batches:
            results = await asyncio.gather(*(self.ops.roll_out(targets[name], changes[name]) for name in batch
                                             if name in targets))
            failed.update({name: n for name, n in results if n})
            if canary and failed:
                wl.event(reason.CANARY_FAILED, f"canary {batch[0]} failed; placing its replicas elsewhere before "
                         "going on", cluster=batch[0])
                return failed | {name: changes[name] for name in order[1:]}
        wl.update_search_attributes()
        return failed

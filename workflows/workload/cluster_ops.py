"""What a workload does to its clusters and tells its endpoints: roll out, remove, read inventories, drain.

The collaborator that the workflow's converging, healing, teardown and the upgrade all receive: a
rollout on one cluster is a `ClusterRolloutWorkflow` child (workflows/rollout.py); a drain asks every
endpoint that follows the workload to stop routing there and waits (bounded) for its answer."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ChildWorkflowError

from contracts import conditions as reason
from contracts import endpoint as endpoint_contract
from contracts import rollout as rollout_contract
from contracts.ids import CLUSTERS, STAGE, WORKLOAD, cluster_rollout_workflow_id
from contracts.inventory import ACTIVITY_READ_INVENTORY, ReadInventoryInput
from contracts.rollout import ClusterRolloutInput, ClusterRolloutResult
from contracts.workload import ACTIVITY_LIST_CLUSTERS, ClusterState, ClusterTarget, ClusterTargets, NoInput
from wingsmith.domain.endpoints import BackendRef, WorkloadRef
from wingsmith.domain.placement.models import ClusterInventory
from wingsmith.domain.workloads import WorkloadPlan
from workflows import policies
from workflows.workload.state import Workload

Mode = Literal["apply", "delete"]


def cause_of(err: ChildWorkflowError | ActivityError) -> str:
    """The words of what failed underneath (the activity's or the child's own message)."""
    return getattr(err.cause, "message", None) or str(err)


class ClusterOps:
    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        # Endpoints that confirmed they stopped routing: to the whole workload (a delete may go on), or
        # to one of its clusters, as (endpoint workflow id, backend) (a scale-down may go on).
        self.drained_endpoints: set[str] = set()
        self.drained_backends: set[tuple[str, BackendRef]] = set()
        # Why a cluster's last rollout failed: its state may be gone (the failed deployment removed).
        self.failures: dict[str, str] = {}
        # Clusters whose scaling failed while their old deployment kept serving: placing again does not
        # ask them at once (see Converger); the next heal or placement may.
        self.unscaled: set[str] = set()

    # --- the clusters ------------------------------------------------------------------------------

    async def targets(self) -> dict[str, ClusterTarget]:
        """The registered clusters, with their kubeconfig references."""
        targets = await workflow.execute_local_activity(ACTIVITY_LIST_CLUSTERS, NoInput(), result_type=ClusterTargets,
                                                        **policies.REGISTRY)
        return {t.info.name: t for t in targets.clusters}

    async def inventory(self, target: ClusterTarget) -> ClusterInventory:
        if target.manual_inventory is not None:
            return target.manual_inventory
        try:
            return await workflow.execute_activity(
                ACTIVITY_READ_INVENTORY, ReadInventoryInput(cluster=target.info.name, kubeconfig=target.kubeconfig),
                result_type=ClusterInventory, **policies.inventory_read(self.workload.params.kube_task_queue))
        except ActivityError as err:
            # A cluster that stays unreadable takes no replicas this time; letting the error out would
            # fail the whole workflow with nothing rolled back and the registry left saying "placing".
            return ClusterInventory(cluster=target.info.name, error=f"unreadable after retries: {cause_of(err)}")

    async def roll_out(self, target: ClusterTarget, replicas: int) -> tuple[str, int]:
        """Bring the workload's own version on this cluster to `replicas` (0: remove it), and keep its
        cluster state. Returns (cluster, replicas lost): 0 when it serves or was removed as asked."""
        wl, name = self.workload, target.info.name
        state = wl.state.clusters.setdefault(name, ClusterState(cluster=name))
        mode: Mode = "delete" if replicas == 0 else "apply"
        # A serving deployment of this version that only scales stays routed meanwhile: it may be the
        # endpoint's last backend while another cluster heals.
        scaling = state.state == "serving" and state.revision == wl.plan.revision and state.dgd_name is not None
        keep_routed = scaling and mode == "apply"
        state.state = "deleting" if mode == "delete" else "rolling_out"
        try:
            result = await self.rollout(target, replicas, mode, keep_routed=keep_routed)
        except ChildWorkflowError as err:
            if keep_routed:
                return await self._scaling_failed(target, state, replicas, cause_of(err))
            state.state, state.error = "failed", cause_of(err)
            self.failures[name] = state.error
            if name not in wl.state.excluded:
                wl.state.excluded.append(name)
            wl.event(reason.CLUSTER_FAILED, f"{name} failed: {state.error}", cluster=name, cause=state.error)
            if mode == "apply":
                await self._remove_failed(target)
            return name, replicas
        if mode == "delete":
            del wl.state.clusters[name]
            wl.event(reason.CLUSTER_REMOVED, f"{name} removed", cluster=name)
            return name, 0
        self._serving(state, replicas, result)
        self.unscaled.discard(name)
        wl.event(reason.CLUSTER_SERVING, f"{name} serving {replicas} replica(s) at {result.frontend_url}",
                 cluster=name, replicas=replicas, frontend_url=result.frontend_url)
        await self.notify_subscribers()
        return name, 0

    def _serving(self, state: ClusterState, replicas: int, result: ClusterRolloutResult) -> None:
        """What a rollout that serves leaves: the cluster serves `replicas` as applied, seen well now."""
        state.state, state.replicas, state.error = "serving", replicas, None
        state.dgd_name, state.frontend_url = result.dgd_name, result.frontend_url
        state.revision = self.workload.plan.revision
        state.generation, state.spec_hash, state.unhealthy_since, state.drift = (
            result.generation, result.spec_hash, None, None)
        state.last_ok_at, state.fault_at, state.fault_after = workflow.now(), None, None

    async def _scaling_failed(self, target: ClusterTarget, state: ClusterState, wanted: int,
                              cause: str) -> tuple[str, int]:
        """A serving deployment could not be scaled: it is never taken away for that (it may be the
        endpoint's last backend). It stays serving, and routed, at its old count; what the failed apply may
        have left (a spec asking for `wanted`) is put back to that count, still routed. The replicas it
        could not take are the caller's to place again, later. Returns (cluster, replicas not as asked)."""
        wl, name, old = self.workload, target.info.name, state.replicas
        try:
            result = await self.rollout(target, old, "apply", keep_routed=True)
        except ChildWorkflowError as err:
            # Still serving as far as anyone can tell: the watch's next look says otherwise if it is not.
            state.state = "serving"
            put_back = f"its deployment could not be put back to that count yet: {cause_of(err)}"
        else:
            self._serving(state, old, result)
            put_back = "its deployment put back to that count"
        self.unscaled.add(name)
        wl.event(reason.SCALE_INCOMPLETE, f"{name}: scaling to {wanted} replica(s) failed ({cause}); it keeps "
                 f"serving {old} replica(s) ({put_back}), and the plane tries again later", cluster=name,
                 replicas=old, wanted=wanted, cause=cause)
        return name, abs(wanted - old)

    async def rollout(self, target: ClusterTarget, replicas: int, mode: Mode,
                      plan: WorkloadPlan | None = None, *, keep_routed: bool = False) -> ClusterRolloutResult:
        """One rollout child on one cluster, changing no state here. `plan`: another version's (an
        upgrade's); the workload's own by default."""
        wl = self.workload
        name, plan = target.info.name, plan or wl.plan
        return await workflow.execute_child_workflow(
            rollout_contract.WORKFLOW, self._rollout_input(target, replicas, mode, plan, keep_routed),
            result_type=ClusterRolloutResult,
            id=cluster_rollout_workflow_id(plan.workload_id, name, plan.revision),
            task_queue=workflow.info().task_queue,
            static_summary=f"{mode} {plan.workload_id} on {name} ({replicas} replicas)"
            + (f", revision {plan.revision}" if plan.revision else ""),
            search_attributes=TypedSearchAttributes([
                SearchAttributePair(WORKLOAD, wl.plan.workload_id), SearchAttributePair(CLUSTERS, [name]),
                SearchAttributePair(STAGE, "rollout")]))

    async def remove_everywhere(self) -> None:
        """Every cluster this workload holds a deployment on is rolled out to nothing (failures stay
        in the cluster states, for the teardown to retry)."""
        targets = await self.targets()
        names = sorted(self.workload.state.clusters)
        await asyncio.gather(*(self.roll_out(targets[n], 0) for n in names if n in targets), return_exceptions=True)

    async def _remove_failed(self, target: ClusterTarget) -> None:
        """A failed deployment is not left running: crash-looping pods hold their GPUs, and pods that
        found no node would take one later for replicas now placed elsewhere."""
        wl, name = self.workload, target.info.name
        try:
            await self.rollout(target, 0, "delete")
        except ChildWorkflowError as err:
            wl.event(reason.FAILED_DEPLOYMENT_LEFT, f"{name}: the failed deployment could not be removed now "
                     f"({cause_of(err)}); it is removed with the workload", cluster=name, cause=cause_of(err))
            return
        # Nothing runs there any more: the status lists current deployments only, the failure stays in
        # the events (and the cluster stays excluded from placement).
        wl.state.clusters.pop(name, None)
        wl.event(reason.FAILED_DEPLOYMENT_REMOVED, f"{name}: the failed deployment was removed", cluster=name)

    def _rollout_input(self, target: ClusterTarget, replicas: int, mode: Mode, plan: WorkloadPlan,
                       keep_routed: bool = False) -> ClusterRolloutInput:
        params = self.workload.params
        return ClusterRolloutInput(
            mode=mode, workload_id=plan.workload_id, cluster=target.info.name, revision=plan.revision,
            kubeconfig=target.kubeconfig, namespace=plan.namespace,
            spec=plan.rollout_spec(target.info.name, replicas) if replicas else None,
            weight_bytes=plan.weight_bytes, kube_task_queue=params.kube_task_queue,
            ready_deadline_seconds=params.ready_deadline_seconds, poll_seconds=params.poll_seconds,
            unschedulable_grace_seconds=params.unschedulable_grace_seconds, keep_routed=keep_routed)

    # --- the endpoints that follow it ------------------------------------------------------------------

    def backend(self, cluster: str) -> BackendRef:
        """This workload's deployment on `cluster`, as endpoints route to it (the version it runs there)."""
        wl = self.workload
        held = wl.state.clusters.get(cluster)
        return BackendRef(cluster=cluster, workload_id=wl.plan.workload_id,
                          revision=held.revision if held else wl.plan.revision)

    def me(self) -> WorkloadRef:
        return WorkloadRef(workload_id=self.workload.plan.workload_id)

    async def drain_clusters(self, clusters: list[str]) -> None:
        """Endpoints stop sending new requests to these clusters and let in-flight ones finish before
        their deployments go (as a delete drains the whole workload)."""
        await self.drain_backends([self.backend(name) for name in clusters], ", ".join(clusters))

    async def drain_backends(self, backends: list[BackendRef], clusters: str) -> None:
        wl = self.workload
        waiting: set[tuple[str, BackendRef]] = set()
        for wid in list(wl.state.subscribers):
            for backend in backends:
                if await self.signal(wid, endpoint_contract.SIGNAL_BACKEND_LEAVING, backend):
                    waiting.add((wid, backend))
        try:
            await workflow.wait_condition(lambda: waiting <= self.drained_backends,
                                          timeout=timedelta(seconds=wl.params.drain_grace_seconds))
            if waiting:
                wl.event(reason.ENDPOINTS_DRAINED, f"endpoints drained {clusters}", clusters=clusters)
        except TimeoutError:
            wl.event(reason.DRAIN_TIMED_OUT, f"endpoints did not confirm draining {clusters} in time; removing anyway",
                     clusters=clusters)
        self.drained_backends -= waiting

    async def drain_workload(self) -> None:
        """Endpoints stop routing to this workload (and let in-flight requests finish) before it goes."""
        wl = self.workload
        if not wl.state.subscribers:
            return
        for wid in list(wl.state.subscribers):
            if not await self.signal(wid, endpoint_contract.SIGNAL_WORKLOAD_DELETING, self.me()):
                # An endpoint that ended (deleted meanwhile) routes nothing: waiting for it would
                # hold the teardown for the whole grace period.
                self.drained_endpoints.add(wid)
        try:
            await workflow.wait_condition(lambda: set(wl.state.subscribers) <= self.drained_endpoints,
                                          timeout=timedelta(seconds=wl.params.drain_grace_seconds))
        except TimeoutError:
            wl.event(reason.DRAIN_TIMED_OUT, "endpoints did not confirm draining within the grace period; "
                     "deleting anyway")

    async def backend_gone(self, backend: BackendRef) -> None:
        """Every endpoint drops a backend whose deployment was removed."""
        for wid in list(self.workload.state.subscribers):
            await self.signal(wid, endpoint_contract.SIGNAL_BACKEND_GONE, backend)

    async def notify_subscribers(self) -> None:
        for wid in list(self.workload.state.subscribers):
            await self.signal(wid, endpoint_contract.SIGNAL_WORKLOAD_CHANGED, self.me())

    async def signal(self, workflow_id: str, signal: str, arg: WorkloadRef | BackendRef) -> bool:
        """`signal`: one of the endpoint's signal names (contracts.endpoint)."""
        handle = workflow.get_external_workflow_handle(workflow_id)
        try:
            await handle.signal(signal, arg)
            return True
        except Exception as exc:  # noqa: BLE001 - an endpoint that is gone no longer needs telling
            self.workload.event(reason.SIGNAL_FAILED, f"could not signal {workflow_id}: {exc}", endpoint=workflow_id)
            return False

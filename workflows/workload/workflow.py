"""WorkloadWorkflow (`workload/<id>`): lives while the workload exists.

plan (carried in) → read inventories → place → one ClusterRolloutWorkflow child per cluster, the
first as a canary and the rest in parallel once it serves → serving. A cluster that fails has its
replicas re-placed elsewhere; when that is impossible every applied cluster is rolled back (a
saga, shielded from cancellation) and the workflow fails with the cause. Updates `scale`, `upgrade`
(and pause, resume, abort) and `delete`; query `status`.

Serving is observed, not assumed (workflows/workload/observe.py) and healed
(workflows/workload/heal.py). The class keeps the handlers and the main loop; the work is done by
the modules beside it, on one `Workload` (state.py) through one `ClusterOps` (cluster_ops.py):
converge.py, observe.py, heal.py, teardown.py and upgrade.py. It continues as new every
`watch.looks_per_run` answered observations, or sooner when Temporal suggests, so its history stays
bounded.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from contracts import conditions as reason
from contracts import upgrade as upgrade_contract
from contracts import workload as contract
from contracts.ids import CLUSTERS
from contracts.upgrade import UpgradeControl, UpgradeRequest, UpgradeStatus
from contracts.workload import (
    ALREADY_DELETED,
    NOT_SCALABLE,
    DeleteRequest,
    ScaleRequest,
    WorkloadStatus,
    WorkloadWorkflowInput,
    search_attributes,
)
from wingsmith.domain.endpoints import BackendDrained, EndpointRef
from workflows.history import time_to_continue_as_new
from workflows.workload.cluster_ops import ClusterOps
from workflows.workload.converge import Converger, Unplaceable
from workflows.workload.heal import Healer
from workflows.workload.observe import Observer
from workflows.workload.state import Workload
from workflows.workload.teardown import roll_back, tear_down
from workflows.workload.upgrade import Upgrades


@workflow.defn(name=contract.WORKFLOW)
class WorkloadWorkflow:
    @workflow.init
    def __init__(self, params: WorkloadWorkflowInput) -> None:
        self.workload = wl = Workload(params)
        self.ops = ClusterOps(wl)
        self.converger = Converger(wl, self.ops)
        self.healer = Healer(wl, self.ops, self.converger)
        self.observer = Observer(wl, self.ops, self.healer)
        self.upgrades = Upgrades(wl, self.ops)

    # --- lifecycle ------------------------------------------------------------------------------

    @workflow.run
    async def run(self, params: WorkloadWorkflowInput) -> WorkloadStatus:
        wl = self.workload
        # Its own attributes, so a workload started from user code is found like one the API started.
        workflow.upsert_search_attributes(
            [pair.key.value_set(pair.value) for pair in search_attributes(params, wl.state.stage)]
            + ([CLUSTERS.value_set(sorted(wl.state.clusters))] if wl.state.clusters else []))
        if params.resume is None:
            await wl.record("planning", "created", {"replicas": wl.plan.replicas})
            try:
                async with wl.lock:
                    await self.converger.converge(wl.plan.replicas, initial=True)
            except Unplaceable as exc:
                return await roll_back(wl, self.ops, str(exc))
            except asyncio.CancelledError:
                await roll_back(wl, self.ops, "cancelled during the first rollout", reraise=asyncio.CancelledError())
            wl.set_stage("serving")
            await wl.record("serving", f"serving:{wl.state.placement_revision}", wl.summary())
        await self._observe_and_heal()
        await self.upgrades.end_before_delete()
        async with wl.lock:
            await tear_down(wl, self.ops)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.status()

    async def _observe_and_heal(self) -> None:
        """Hear from every cluster through its observation (one in flight per cluster, answering on news)
        and act on what they say, until the workload is deleted; continue as new after `looks_per_run`
        answers (or when the history is long enough), once no handler is running."""
        wl, observer, watch = self.workload, self.observer, self.workload.params.watch

        def time_to_continue() -> bool:  # not while an upgrade runs: it carries on in this run
            return self.upgrades.run is None and (observer.answers >= watch.looks_per_run
                                                  or time_to_continue_as_new(wl.params.history_limit))

        def work() -> bool:  # a scale or a heal holds the lock: news waits for it, then may be stale
            return not wl.lock.locked() and (bool(observer.news) or self.healer.placing_due or observer.missing())

        while True:
            await workflow.wait_condition(lambda: wl.deleting or time_to_continue() or work())
            if wl.deleting:
                await observer.end()
                return
            if time_to_continue():
                # A delete arriving meanwhile is a running handler that waits for this loop: let it win.
                await workflow.wait_condition(
                    lambda: wl.deleting or (workflow.all_handlers_finished() and not wl.lock.locked()))
                await observer.end()
                if wl.deleting:
                    return
                workflow.continue_as_new(wl.params.model_copy(update={"resume": wl.state, "plan": wl.plan}))
            if observer.news or self.healer.placing_due:
                await observer.act_on_news()
            if not wl.lock.locked():
                await observer.start()

    # --- updates, signals, query ------------------------------------------------------------------

    @workflow.update(name=contract.UPDATE_SCALE)
    async def scale(self, request: ScaleRequest) -> WorkloadStatus:
        wl = self.workload
        async with wl.lock:
            wl.set_stage("scaling")
            await wl.record("scaling", f"scale:{workflow.info().get_current_history_length()}",
                            {"from": wl.replicas(), "to": request.replicas, "by": request.requested_by})
            try:
                await self.converger.converge(request.replicas, initial=False)
            except Unplaceable as exc:
                wl.event(reason.SCALE_INCOMPLETE, f"scale to {request.replicas} incomplete: {exc}",
                         replicas=request.replicas)
            wl.plan = wl.plan.model_copy(update={"replicas": wl.replicas()})
            wl.set_stage("serving")
            length = workflow.info().get_current_history_length()
            await wl.record("serving", f"serving:{wl.state.placement_revision}:{length}", wl.summary())
            return self.status()

    @scale.validator
    def _validate_scale(self, request: ScaleRequest) -> None:
        wl = self.workload
        if wl.deleting and wl.state.stage not in ("deleted", "failed"):
            # The stage still shows the work in flight; the reason is the delete queued behind it.
            raise ApplicationError("a delete of this workload is pending; it cannot be scaled", type=NOT_SCALABLE)
        if wl.state.stage in ("deleting", "deleted", "failed"):
            raise ApplicationError(f"workload is {wl.state.stage}; it cannot be scaled", type=NOT_SCALABLE)
        if self.upgrades.busy:
            raise ApplicationError("an upgrade is running; scale once it ends (or abort it)", type=NOT_SCALABLE)

    @workflow.update(name=upgrade_contract.UPDATE_UPGRADE)
    async def upgrade(self, request: UpgradeRequest) -> UpgradeStatus:
        """Move to another approved artifact, progressively (upgrade.py); answers once started."""
        return await self.upgrades.start(request)

    @upgrade.validator
    def _validate_upgrade(self, request: UpgradeRequest) -> None:
        self.upgrades.validate(request)

    @workflow.update(name=upgrade_contract.UPDATE_PAUSE)
    def pause_upgrade(self, request: UpgradeControl) -> UpgradeStatus:
        return self.upgrades.control("pause", request)

    @pause_upgrade.validator
    def _validate_pause(self, request: UpgradeControl) -> None:
        self.upgrades.validate_control("pause")

    @workflow.update(name=upgrade_contract.UPDATE_RESUME)
    def resume_upgrade(self, request: UpgradeControl) -> UpgradeStatus:
        return self.upgrades.control("resume", request)

    @resume_upgrade.validator
    def _validate_resume(self, request: UpgradeControl) -> None:
        self.upgrades.validate_control("resume")

    @workflow.update(name=upgrade_contract.UPDATE_ABORT)
    def abort_upgrade(self, request: UpgradeControl) -> UpgradeStatus:
        return self.upgrades.control("abort", request)

    @abort_upgrade.validator
    def _validate_abort(self, request: UpgradeControl) -> None:
        self.upgrades.validate_control("abort")

    @workflow.update(name=contract.UPDATE_DELETE)
    async def delete(self, request: DeleteRequest) -> WorkloadStatus:
        wl = self.workload
        wl.delete_by = request.requested_by
        wl.deleting = True
        await workflow.wait_condition(lambda: wl.state.stage == "deleted")
        return self.status()

    @delete.validator
    def _validate_delete(self, request: DeleteRequest) -> None:
        if self.workload.state.stage in ("deleted", "failed"):
            raise ApplicationError(f"workload is already {self.workload.state.stage}", type=ALREADY_DELETED)

    @workflow.signal(name=contract.SIGNAL_SUBSCRIBE)
    def subscribe(self, endpoint: EndpointRef) -> None:
        """An endpoint follows this workload: it is told about changes and drains it before deletion."""
        subscribers = self.workload.state.subscribers
        if endpoint.endpoint_workflow_id not in subscribers:
            subscribers.append(endpoint.endpoint_workflow_id)
        # Back after leaving it (endpoint membership changed): an old "drained" must not let a delete skip it.
        self.ops.drained_endpoints.discard(endpoint.endpoint_workflow_id)

    @workflow.signal(name=contract.SIGNAL_UNSUBSCRIBE)
    def unsubscribe(self, endpoint: EndpointRef) -> None:
        subscribers = self.workload.state.subscribers
        if endpoint.endpoint_workflow_id in subscribers:
            subscribers.remove(endpoint.endpoint_workflow_id)

    @workflow.signal(name=contract.SIGNAL_DRAINED)
    def drained(self, endpoint: EndpointRef) -> None:
        """That endpoint no longer routes to this workload: the delete may go on."""
        self.ops.drained_endpoints.add(endpoint.endpoint_workflow_id)

    @workflow.signal(name=contract.SIGNAL_BACKEND_DRAINED)
    def backend_drained(self, drained: BackendDrained) -> None:
        """That endpoint no longer routes to one of this workload's clusters: the scale-down may go on."""
        self.ops.drained_backends.add((drained.endpoint_workflow_id, drained.backend))

    @workflow.query(name=contract.QUERY_STATUS)
    def status(self) -> WorkloadStatus:
        return self.workload.status()

"""EndpointWorkflow (`endpoint/<model-name>`): lives while the endpoint exists and keeps the
gateway's routes equal to the ready deployments of its workloads.

A deployment joins once its frontend lists the served name; weights follow replicas; a workload
being deleted is drained first (weight 0, in-flight requests get a grace period) and only then
removed and told it may go. Every pass reconciles against the gateway's current state, so a crash
between two gateway calls leaves nothing half-done: the next pass finishes it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

import workflows.workload as workload_workflow  # a module import: the two workflows signal each other
from contracts.endpoint import (
    ALREADY_DELETED,
    ENDPOINT_DELETING,
    INVALID_WORKLOADS,
    STILL_DRAINING,
    EndpointState,
    EndpointStatus,
    EndpointWorkflowInput,
    SetWorkloads,
)
from contracts.ids import STAGE, workload_workflow_id
from workflows.history import time_to_continue_as_new

with workflow.unsafe.imports_passed_through():
    from activities.endpoint import (
        CheckWorkloadsInput,
        DrainInput,
        EndpointActivities,
        EndpointRecord,
        ObserveInput,
        SetRoutesInput,
    )
    from wingsmith.endpoints import BackendDrained, BackendRef, EndpointRef, WorkloadRef
    from wingsmith.gateway.routes import EndpointRoutes

SignalArg = TypeVar("SignalArg", EndpointRef, BackendDrained)

# Each call is a database read, a few probes or one gateway call: short, so a worker that dies
# mid-call is written off in seconds and the next pass runs elsewhere (60 s held routes stale).
_IO = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=20),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)))

# A person waits on the membership check: a registry that stays down fails the update, not the endpoint.
_CHECK = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=10),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3))


@workflow.defn
class EndpointWorkflow:
    @workflow.init
    def __init__(self, params: EndpointWorkflowInput) -> None:
        self.params = params
        self.state = params.resume or EndpointState(workloads=list(dict.fromkeys(params.workloads)),
                                                    model=params.model.lower() if params.model else None)
        self.dirty = True
        self.deleting = False

    @workflow.run
    async def run(self, params: EndpointWorkflowInput) -> EndpointStatus:
        # Its own attributes, so an endpoint started from user code is found like one the API started.
        workflow.upsert_search_attributes([STAGE.value_set(self.state.stage)])
        if params.resume is None:
            for wid in self.state.workloads:
                await self._tell(wid, workload_workflow.WorkloadWorkflow.subscribe, self._me())
        while not self.deleting:
            self.dirty = False
            await self._reconcile()
            await self._finish_drains()
            self._set_stage("serving" if self.state.routes and self.state.routes.serving else "waiting")
            try:
                await workflow.wait_condition(lambda: self.dirty or self.deleting,
                                              timeout=timedelta(seconds=params.resync_seconds))
            except TimeoutError:
                pass  # a periodic pass catches frontends that came or went without a signal
            if time_to_continue_as_new(params.history_limit) and not self.deleting:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(params.model_copy(update={"resume": self.state}))
        await self._tear_down()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.status()

    # --- signals from workloads, updates from the API ------------------------------------------------

    @workflow.signal
    def workload_changed(self, change: WorkloadRef) -> None:
        self.dirty = True

    @workflow.signal
    def workload_deleting(self, deleting: WorkloadRef) -> None:
        if deleting.workload_id in self.state.workloads and deleting.workload_id not in self.state.draining:
            self.state.draining.append(deleting.workload_id)
        self.dirty = True

    @workflow.signal
    def backend_leaving(self, backend: BackendRef) -> None:
        """A workload is about to remove one cluster's deployment."""
        if backend.workload_id in self.state.workloads and backend not in self.state.draining_backends:
            self.state.draining_backends.append(backend)
        self.dirty = True

    @workflow.signal
    def backend_gone(self, backend: BackendRef) -> None:
        for held in (self.state.draining_backends, self.state.drained_backends):
            if backend in held:
                held.remove(backend)
        self.dirty = True

    @workflow.update
    async def set_workloads(self, request: SetWorkloads) -> EndpointStatus:
        """Change the endpoint's workloads. Joining ones are routed once they serve the name; leaving
        ones go to weight 0, their in-flight requests finish, and only then do they leave the routes.
        Returns once the change is recorded (the drain goes on in the endpoint's passes)."""
        wanted = list(dict.fromkeys(request.workloads))
        # Every workload must serve the endpoint's model, whether or not any of the old ones stays.
        check = await workflow.execute_activity_method(EndpointActivities.check_workloads, CheckWorkloadsInput(
            name=self.params.name, workloads=wanted, model=self.state.model, current=self.state.workloads), **_CHECK)
        if check.problems:
            raise ApplicationError("; ".join(check.problems), type=INVALID_WORKLOADS)
        self._validate_membership(request)  # again: the endpoint may have changed during the check
        self.state.model = self.state.model or check.model
        for wid in wanted:
            if wid not in self.state.workloads:
                self.state.workloads.append(wid)
                await self._tell(wid, workload_workflow.WorkloadWorkflow.subscribe, self._me())
        leaving = [w for w in self.state.workloads if w not in wanted and w not in self.state.draining]
        self.state.draining.extend(leaving)  # removed workloads are drained, not cut off
        self.state.passes += 1
        await self._record(self.state.stage, event="endpoint_workloads_changed", actor=request.requested_by)
        self.dirty = True
        if self.deleting:
            # A delete came in while the change was being recorded: the teardown drains every workload,
            # the new ones too, so the change never takes effect and the caller must not hear it did.
            raise ApplicationError("the endpoint is being deleted; the change was dropped", type=ENDPOINT_DELETING)
        return self.status()

    @set_workloads.validator
    def _validate_membership(self, request: SetWorkloads) -> None:
        if self.deleting or self.state.stage in ("deleting", "deleted"):
            raise ApplicationError("the endpoint is being deleted", type=ENDPOINT_DELETING)
        if not request.workloads:
            raise ApplicationError("an endpoint needs at least one workload", type=INVALID_WORKLOADS)
        back = [w for w in request.workloads if w in self.state.draining]
        if back:
            raise ApplicationError(f"workload(s) {', '.join(back)} are still draining from this endpoint; "
                                   "add them again once they have left", type=STILL_DRAINING)

    @workflow.update
    async def delete(self) -> EndpointStatus:
        self.deleting = True
        await workflow.wait_condition(lambda: self.state.stage == "deleted")
        return self.status()

    @delete.validator
    def _validate_delete(self) -> None:
        if self.state.stage == "deleted":
            raise ApplicationError("endpoint already deleted", type=ALREADY_DELETED)

    @workflow.query
    def status(self) -> EndpointStatus:
        return EndpointStatus(name=self.params.name, stage=self.state.stage, workloads=self.state.workloads,
                              draining=self.state.draining, routes=self.state.routes, team=self.params.team,
                              model=self.state.model)

    # --- reconciling -------------------------------------------------------------------------------

    async def _reconcile(self) -> None:
        routes = await workflow.execute_activity_method(EndpointActivities.observe, ObserveInput(
            name=self.params.name, workloads=self.state.workloads, draining=self.state.draining,
            draining_backends=self.state.draining_backends), **_IO)
        await workflow.execute_activity_method(EndpointActivities.set_routes, SetRoutesInput(routes=routes), **_IO)
        if routes != self.state.routes:
            self.state.routes = routes
            self.state.passes += 1
            await self._record("serving" if routes.serving else "waiting")

    async def _finish_backend_drains(self) -> None:
        """Clusters a workload scales away from: wait for their in-flight requests (bounded), then let
        the workload remove them. They keep weight 0 until it says they are gone."""
        leaving = [b for b in self.state.draining_backends if b not in self.state.drained_backends]
        if not leaving:
            return
        routed = {b.id for b in (self.state.routes.backends if self.state.routes else [])}
        await self._wait_drained([b for b in leaving if b.id in routed])
        me = workflow.info().workflow_id
        for backend in leaving:
            self.state.drained_backends.append(backend)
            await self._tell(backend.workload_id, workload_workflow.WorkloadWorkflow.backend_drained,
                             BackendDrained(endpoint_workflow_id=me, backend=backend))

    async def _finish_drains(self) -> None:
        """Draining workloads: wait for their in-flight requests (bounded), then drop them and let
        each workload know it may tear its deployments down."""
        await self._finish_backend_drains()
        if not self.state.draining:
            return
        draining = list(self.state.draining)
        await self._wait_drained([BackendRef.of(b) for b in (self.state.routes.backends if self.state.routes else [])
                                  if b.workload_id in draining])
        self.state.workloads = [w for w in self.state.workloads if w not in draining]
        self.state.draining = [w for w in self.state.draining if w not in draining]
        await self._reconcile()
        for wid in draining:
            await self._tell(wid, workload_workflow.WorkloadWorkflow.drained, self._me())
            await self._tell(wid, workload_workflow.WorkloadWorkflow.unsubscribe, self._me())

    async def _tear_down(self) -> None:
        self._set_stage("deleting")
        self.state.draining = list(self.state.workloads)
        await self._reconcile()
        await self._finish_drains()
        await workflow.execute_activity_method(EndpointActivities.set_routes, SetRoutesInput(
            routes=EndpointRoutes(model_name=self.params.name)), **_IO)
        self.state.routes = None
        self._set_stage("deleted")
        await self._record("deleted")

    # --- helpers -----------------------------------------------------------------------------------

    def _me(self) -> EndpointRef:
        return EndpointRef(endpoint_workflow_id=workflow.info().workflow_id)

    async def _wait_drained(self, backends: list[BackendRef]) -> None:
        """Until these backends have no request in flight, at most the grace period."""
        if not backends:
            return
        await workflow.execute_activity_method(
            EndpointActivities.wait_drained,
            DrainInput(name=self.params.name, backends=backends, grace_seconds=self.params.drain_grace_seconds),
            start_to_close_timeout=timedelta(seconds=self.params.drain_grace_seconds + 60),
            heartbeat_timeout=timedelta(seconds=10))

    async def _tell(self, workload_id: str, signal: Callable[[workload_workflow.WorkloadWorkflow, SignalArg], None],
                    arg: SignalArg) -> None:
        handle = workflow.get_external_workflow_handle_for(workload_workflow.WorkloadWorkflow.run,
                                                           workload_workflow_id(workload_id))
        try:
            await handle.signal(signal, arg)
        except Exception:  # noqa: BLE001 - a workload that is gone has nothing to hear
            workflow.logger.info("workload %s did not take the %s signal", workload_id, signal.__name__)

    async def _record(self, state: str, *, event: str | None = None, actor: str = "system") -> None:
        info = workflow.info()
        routes = self.state.routes.backends if self.state.routes else []
        await workflow.execute_activity_method(EndpointActivities.record, EndpointRecord(
            name=self.params.name, workloads=self.state.workloads, state=state, workflow_id=info.workflow_id,
            routes=[b.model_dump(mode="json") for b in routes], event=event, actor=actor, team=self.params.team,
            requested_by=self.params.requested_by,
            step=f"{info.run_id}:{self.state.passes}:{event or state}"), **_IO)

    def _set_stage(self, stage: str) -> bool:
        if self.state.stage == stage:
            return False
        self.state.stage = stage
        workflow.upsert_search_attributes([STAGE.value_set(stage)])
        return True

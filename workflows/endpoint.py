"""EndpointWorkflow (`endpoint/<model-name>`): lives while the endpoint exists and keeps the
gateway's routes equal to the ready deployments of its workloads.

A deployment joins once its frontend lists the served name; weights follow replicas; a workload
being deleted is drained first (weight 0, in-flight requests get a grace period) and only then
removed and told it may go. Every pass reconciles against the gateway's current state, so a crash
between two gateway calls leaves nothing half-done: the next pass finishes it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from contracts import conditions as c
from contracts import endpoint as contract
from contracts import workload as workload_contract
from contracts.endpoint import (
    ALREADY_DELETED,
    ENDPOINT_DELETING,
    INVALID_WORKLOADS,
    STILL_DRAINING,
    CheckWorkloadsInput,
    CheckWorkloadsOutput,
    DrainInput,
    EndpointRecord,
    EndpointState,
    EndpointStatus,
    EndpointWorkflowInput,
    ObserveInput,
    SetRoutesInput,
    SetWorkloads,
)
from contracts.ids import STAGE, workload_workflow_id
from wingsmith.domain.endpoints import BackendDrained, BackendRef, EndpointRef, WorkloadRef
from wingsmith.domain.gateway.routes import EndpointRoutes
from workflows import policies
from workflows.history import time_to_continue_as_new


@workflow.defn(name=contract.WORKFLOW)
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
        self._show_conditions()
        if params.resume is None:
            for wid in self.state.workloads:
                await self._tell(wid, workload_contract.SIGNAL_SUBSCRIBE, self._me())
        while not self.deleting:
            self.dirty = False
            await self._reconcile()
            await self._finish_drains()
            self._show_conditions()  # drains started or finished since the last pass
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

    @workflow.signal(name=contract.SIGNAL_WORKLOAD_CHANGED)
    def workload_changed(self, change: WorkloadRef) -> None:
        self.dirty = True

    @workflow.signal(name=contract.SIGNAL_WORKLOAD_DELETING)
    def workload_deleting(self, deleting: WorkloadRef) -> None:
        if deleting.workload_id in self.state.workloads and deleting.workload_id not in self.state.draining:
            self.state.draining.append(deleting.workload_id)
        self.dirty = True

    @workflow.signal(name=contract.SIGNAL_BACKEND_LEAVING)
    def backend_leaving(self, backend: BackendRef) -> None:
        """A workload is about to remove one cluster's deployment."""
        if backend.workload_id in self.state.workloads and backend not in self.state.draining_backends:
            self.state.draining_backends.append(backend)
        self.dirty = True

    @workflow.signal(name=contract.SIGNAL_BACKEND_GONE)
    def backend_gone(self, backend: BackendRef) -> None:
        for held in (self.state.draining_backends, self.state.drained_backends):
            if backend in held:
                held.remove(backend)
        self.dirty = True

    @workflow.update(name=contract.UPDATE_SET_WORKLOADS)
    async def set_workloads(self, request: SetWorkloads) -> EndpointStatus:
        """Change the endpoint's workloads. Joining ones are routed once they serve the name; leaving
        ones go to weight 0, their in-flight requests finish, and only then do they leave the routes.
        Returns once the change is recorded (the drain goes on in the endpoint's passes)."""
        wanted = list(dict.fromkeys(request.workloads))
        # Every workload must serve the endpoint's model, whether or not any of the old ones stays.
        check = await workflow.execute_activity(contract.ACTIVITY_CHECK_WORKLOADS, CheckWorkloadsInput(
            name=self.params.name, workloads=wanted, model=self.state.model, current=self.state.workloads),
            result_type=CheckWorkloadsOutput, **policies.MEMBERSHIP_CHECK)
        if check.problems:
            raise ApplicationError("; ".join(check.problems), type=INVALID_WORKLOADS)
        self._validate_membership(request)  # again: the endpoint may have changed during the check
        self.state.model = self.state.model or check.model
        for wid in wanted:
            if wid not in self.state.workloads:
                self.state.workloads.append(wid)
                await self._tell(wid, workload_contract.SIGNAL_SUBSCRIBE, self._me())
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

    @workflow.update(name=contract.UPDATE_DELETE)
    async def delete(self) -> EndpointStatus:
        self.deleting = True
        await workflow.wait_condition(lambda: self.state.stage == "deleted")
        return self.status()

    @delete.validator
    def _validate_delete(self) -> None:
        if self.state.stage == "deleted":
            raise ApplicationError("endpoint already deleted", type=ALREADY_DELETED)

    @workflow.query(name=contract.QUERY_STATUS)
    def status(self) -> EndpointStatus:
        return EndpointStatus(name=self.params.name, stage=self.state.stage, workloads=self.state.workloads,
                              draining=self.state.draining, routes=self.state.routes, team=self.params.team,
                              model=self.state.model, conditions=list(self.state.conditions))

    # --- reconciling -------------------------------------------------------------------------------

    async def _reconcile(self) -> None:
        routes = await workflow.execute_activity(contract.ACTIVITY_OBSERVE, ObserveInput(
            name=self.params.name, workloads=self.state.workloads, draining=self.state.draining,
            draining_backends=self.state.draining_backends), result_type=EndpointRoutes, **policies.ENDPOINT_IO)
        await workflow.execute_activity(contract.ACTIVITY_SET_ROUTES, SetRoutesInput(routes=routes),
                                        **policies.ENDPOINT_IO)
        if routes != self.state.routes:
            self.state.routes = routes
            self._show_conditions()
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
            await self._tell(backend.workload_id, workload_contract.SIGNAL_BACKEND_DRAINED,
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
            await self._tell(wid, workload_contract.SIGNAL_DRAINED, self._me())
            await self._tell(wid, workload_contract.SIGNAL_UNSUBSCRIBE, self._me())

    async def _tear_down(self) -> None:
        self._set_stage("deleting")
        self.state.draining = list(self.state.workloads)
        await self._reconcile()
        await self._finish_drains()
        await workflow.execute_activity(contract.ACTIVITY_SET_ROUTES, SetRoutesInput(
            routes=EndpointRoutes(model_name=self.params.name)), **policies.ENDPOINT_IO)
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
        await workflow.execute_activity(
            contract.ACTIVITY_WAIT_DRAINED,
            DrainInput(name=self.params.name, backends=backends, grace_seconds=self.params.drain_grace_seconds),
            **policies.drain_wait(self.params.drain_grace_seconds))

    async def _tell(self, workload_id: str, signal: str, arg: EndpointRef | BackendDrained) -> None:
        """`signal`: one of the workload's signal names (contracts.workload)."""
        handle = workflow.get_external_workflow_handle(workload_workflow_id(workload_id))
        try:
            await handle.signal(signal, arg)
        except Exception:  # noqa: BLE001 - a workload that is gone has nothing to hear
            workflow.logger.info("workload %s did not take the %s signal", workload_id, signal)

    async def _record(self, state: str, *, event: str | None = None, actor: str = "system") -> None:
        info = workflow.info()
        routes = self.state.routes.backends if self.state.routes else []
        await workflow.execute_activity(contract.ACTIVITY_RECORD, EndpointRecord(
            name=self.params.name, workloads=self.state.workloads, state=state, workflow_id=info.workflow_id,
            routes=[b.model_dump(mode="json") for b in routes], event=event, actor=actor, team=self.params.team,
            requested_by=self.params.requested_by,
            step=f"{info.run_id}:{self.state.passes}:{event or state}"), **policies.ENDPOINT_IO)

    def _set_stage(self, stage: str) -> bool:
        if self.state.stage == stage:
            return False
        self.state.stage = stage
        workflow.upsert_search_attributes([STAGE.value_set(stage)])
        self._show_conditions()
        return True

    def _show_conditions(self) -> None:
        """Called on every change of the stage, the routes or the drains."""
        show_conditions(self.state, workflow.now())


def show_conditions(state: EndpointState, now: datetime) -> None:
    """The endpoint's conditions from its routes and what it drains (pure: the caller passes the
    workflow's time). Available says whether any deployment takes the name's requests now."""
    put, serving = state.conditions, state.routes.serving if state.routes else []
    if serving:
        clusters = ", ".join(sorted({b.cluster for b in serving}))
        c.set_condition(put, c.AVAILABLE, "True", c.ROUTES_PUBLISHED,
                        f"{len(serving)} backend(s) take requests (clusters {clusters})", now)
    elif state.stage == "deleted":
        c.set_condition(put, c.AVAILABLE, "False", c.DELETED, "deleted: the gateway holds no route for it", now)
    else:
        c.set_condition(put, c.AVAILABLE, "False", c.NO_ROUTES, "no deployment of "
                        f"{', '.join(state.workloads) or 'its workloads'} serves the name yet", now)
    leaving = [*state.draining, *(f"{b.workload_id} on {b.cluster}" for b in state.draining_backends)]
    if state.stage in ("deleting", "deleted"):
        deleting = state.stage == "deleting"
        c.set_condition(put, c.PROGRESSING, "True" if deleting else "False", c.DELETING if deleting else c.DELETED,
                        state.stage, now)
    elif leaving:
        c.set_condition(put, c.PROGRESSING, "True", c.DRAINING, f"draining {', '.join(leaving)}", now)
    else:
        c.set_condition(put, c.PROGRESSING, "False", c.SETTLED, "its routes follow its serving deployments", now)

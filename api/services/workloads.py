"""Workloads: create one (validated against the approved draft; a dry run writes nothing), list, read, scale,
upgrade (and pause, resume or abort the upgrade), delete, and set what it follows. The workload workflow does
the work; these start it and talk to it. A workload belongs to the team that created it: another team's
answers as an absent one would (api/ownership.py)."""

from __future__ import annotations

import uuid
from typing import Literal

import asyncpg
from pydantic import BaseModel, Field, model_validator
from temporalio.client import Client, RPCTimeoutOrCancelledError, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Principal
from api.errors import ApiError, temporal_unavailable
from api.ownership import hide, listing_team, own_workload
from api.responses import (
    Created,
    DryRun,
    FollowPolicy,
    Planning,
    UpgradeAnswer,
    WorkloadDeleting,
    WorkloadDetail,
    WorkloadSummary,
)
from api.services import autoscaling, planning, quotas, target_plans
from api.services.inventories import LiveReads
from contracts import upgrade as upgrade_contract
from contracts import workload as workload_contract
from contracts.ids import workload_workflow_id
from contracts.traffic_plan import plan_workflow_id
from contracts.upgrade import UpgradeControl, UpgradeRequest, UpgradeStatus
from contracts.workload import DeleteRequest, ScaleRequest, WorkloadStatus
from wingsmith.adapters.starter import create_workload, workload_handle, workload_status
from wingsmith.adapters.store import follow as follow_store
from wingsmith.adapters.store import workloads as store
from wingsmith.adapters.temporal import workflow_ui_url
from wingsmith.adapters.traffic_plans import PlanProgress
from wingsmith.domain.autoscaling import AutoscalingPolicy
from wingsmith.domain.config import Settings
from wingsmith.domain.text import CommentText, SourceText
from wingsmith.domain.upgrade import steps_problem
from wingsmith.domain.workloads import (
    Follow,
    InvalidWorkload,
    WorkloadRequest,
    approved_artifact_from_row,
    check_artifact,
)

UpgradeVerb = Literal["pause", "resume", "abort"]
_VERBS = {"pause": upgrade_contract.UPDATE_PAUSE, "resume": upgrade_contract.UPDATE_RESUME,
          "abort": upgrade_contract.UPDATE_ABORT}


class PatchBody(BaseModel):
    """A scale, an autoscaling policy (`null`: remove it), or both."""
    replicas: int | None = Field(default=None, ge=1, le=256)
    autoscaling: AutoscalingPolicy | None = Field(default=None, description="set the workload's autoscaling policy; "
                                                  "null removes it (docs/autoscaling.md)")

    @model_validator(mode="after")
    def _something(self) -> PatchBody:
        if self.replicas is None and "autoscaling" not in self.model_fields_set:
            raise ValueError("give replicas, autoscaling (null removes it) or both")
        return self


class ScaleBody(BaseModel):
    replicas: int = Field(ge=1, le=256)


class UpgradeBody(UpgradeRequest):
    """`UpgradeRequest` as a person sends it: who asks comes from the token, not the body."""

    artifact_id: SourceText = Field(description="<org>/<name>@<sha> of an approved artifact of the same model")
    requested_by: str = Field(default="unknown", exclude=True, json_schema_extra={"readOnly": True})
    team: str = Field(default="", exclude=True, json_schema_extra={"readOnly": True})
    reason: CommentText | None = Field(default=None, description="why (shown in the events)")


class ControlBody(BaseModel):
    reason: CommentText | None = None


async def create(body: WorkloadRequest, *, principal: Principal, db: asyncpg.Pool, temporal: Client | None,
                 settings: Settings, live_reads: LiveReads, wait: float | None = None) -> Created | DryRun | Planning:
    """The workload started (or, with `dry_run`, what it would do); sized by traffic, where to follow its plan
    when AIConfigurator's answer is not there within `wait` seconds (`target_plans.patience`)."""
    artifact, catalog = await planning.approved(body, db=db, settings=settings)
    choice = None
    if body.target:
        planned = await target_plans.plan_for_target(body, artifact, principal=principal, db=db, temporal=temporal,
                                                     settings=settings, live_reads=live_reads,
                                                     wait=target_plans.patience(wait))
        if isinstance(planned, Planning):
            return planned
        choice = planned
    plan, choice = planning.plan(body, artifact, catalog, choice, settings=settings)
    if body.autoscaling is not None:
        autoscaling.checked(body.autoscaling, plan)  # 422 before anything starts
    if body.dry_run:
        return await planning.workload_dry_run(plan, choice, db=db, temporal=temporal, settings=settings,
                                               live_reads=live_reads, team=principal.team)
    if temporal is None:
        raise temporal_unavailable()
    # Ids are global (they name the workflow): one another team holds answers 409 "taken" and nothing
    # more, where the same id of one's own team would return that workload (a repeated create).
    await own_workload(principal, db, temporal, plan.workload_id, _taken(plan.workload_id))
    # Room in the team's quota first (403 quota_exceeded past it), given back if the workflow does not start.
    taken = await quotas.claim(principal.team, plan.workload_id, plan.hardware, plan.gpus_per_replica,
                               plan.replicas, db=db)
    try:
        handle = await create_workload(temporal, settings, plan=plan, requested_by=principal.name,
                                       repo_id=artifact.repo_id, team=principal.team)
    except BaseException:
        await quotas.release(taken, db=db)
        raise
    if body.autoscaling is not None:
        await autoscaling.set_policy(plan.workload_id, body.autoscaling, principal=principal, db=db, temporal=temporal,
                                     settings=settings, plan=plan, team=principal.team)
    return Created(id=plan.workload_id, workflow_id=handle.id, workflow_url=workflow_ui_url(settings, handle.id),
                   plan=plan)


async def plan_status(ticket: str, *, principal: Principal, db: asyncpg.Pool, temporal: Client | None,
                      settings: Settings, live_reads: LiveReads) -> DryRun | Planning:
    """A traffic plan's status: how far it is while it runs, then the very answer a dry-run create of the
    same request gives (or its refusal: 422 `target_unreachable`, 503 without a perf worker)."""
    held, body = target_plans.held_request(ticket)
    artifact, catalog = await planning.approved(body, db=db, settings=settings)
    assert body.target is not None
    params = target_plans.plan_input(artifact, held.cards, body.target, settings)
    state = await target_plans.state_of(temporal, plan_workflow_id(params))
    if state is None and not held.young():
        raise target_plans.plan_gone()
    if state is None or isinstance(state, PlanProgress):
        return target_plans.following(ticket, held.cards, params, settings, state or PlanProgress(state="starting"),
                                      create=False)
    _, prices = await target_plans.fleet(body, db=db, temporal=temporal, settings=settings, live_reads=live_reads)
    plan, choice = planning.plan(body, artifact, catalog, target_plans.chosen(state, prices), settings=settings)
    return await planning.workload_dry_run(plan, choice, db=db, temporal=temporal, settings=settings,
                                           live_reads=live_reads, team=principal.team)


async def list_workloads(viewer: Principal, *, db: asyncpg.Pool, limit: int) -> list[WorkloadSummary]:
    """The newest workloads `viewer` may see: its team's; an admin's: every team's."""
    return [WorkloadSummary.model_validate(row)
            for row in await store.list_workloads(db, limit=limit, team=listing_team(viewer))]


async def get_workload(workload_id: str, *, viewer: Principal, db: asyncpg.Pool, temporal: Client | None,
                       settings: Settings) -> WorkloadDetail:
    """The registry row with its deployments, placement, events and follow policy, plus the workflow's live
    status; only the workflow's view while it has not written the row yet."""
    row = await store.get_workload(db, workload_id)
    live = None
    if temporal is not None:
        try:
            live = await workload_status(temporal, workload_id)
        except (RPCError, Exception):  # noqa: BLE001 - the registry row still answers
            live = None
    not_found = ApiError(404, f"workload {workload_id} not found")
    if row is None and live is None:
        raise not_found
    hide(viewer, "workload", workload_id, row["team"] if row else live.team if live else None, not_found)
    out = row or {"id": workload_id}
    out["workflow_id"] = workload_workflow_id(workload_id)
    out["workflow_url"] = workflow_ui_url(settings, out["workflow_id"])
    out["live"] = live.model_dump(mode="json") if live else None
    out["upgrade"] = live.upgrade.model_dump(mode="json") if live and live.upgrade else None
    return WorkloadDetail.model_validate(out)


async def scale(workload_id: str, replicas: int, *, principal: Principal, db: asyncpg.Pool,
                temporal: Client) -> WorkloadStatus:
    await own_workload(principal, db, temporal, workload_id, gone(workload_id))
    taken = await quotas.claim_scale(workload_id, replicas, db=db)  # the owner team's quota (403 past it)
    handle = workload_handle(temporal, workload_id)
    try:
        return await handle.execute_update(workload_contract.UPDATE_SCALE, ScaleRequest(
            replicas=replicas, requested_by=principal.name, team=principal.team), result_type=WorkloadStatus)
    except _UPDATE_ERRORS as err:
        await _give_back(taken, err, db)
        raise update_error(err, workload_id) from None


async def patch(workload_id: str, body: PatchBody, *, principal: Principal, db: asyncpg.Pool, temporal: Client,
                settings: Settings) -> WorkloadStatus:
    """Set or remove the autoscaling policy, then scale when asked; answers with the workload's status."""
    if "autoscaling" in body.model_fields_set:
        if body.autoscaling is None:
            await autoscaling.remove_policy(workload_id, principal=principal, db=db)
        else:
            await autoscaling.set_policy(workload_id, body.autoscaling, principal=principal, db=db, temporal=temporal,
                                         settings=settings)
    if body.replicas is not None:
        return await scale(workload_id, body.replicas, principal=principal, db=db, temporal=temporal)
    try:
        return await workload_status(temporal, workload_id)
    except RPCError as err:
        raise update_error(err, workload_id) from None


async def upgrade(workload_id: str, body: UpgradeBody, *, principal: Principal, db: asyncpg.Pool, temporal: Client,
                  settings: Settings) -> UpgradeAnswer:
    """Start the progressive upgrade to another approved artifact of the same model."""
    await own_workload(principal, db, temporal, workload_id, gone(workload_id))
    if (problem := steps_problem(body.steps)) is not None:
        raise ApiError(422, problem, code="invalid_upgrade", details={"field": "steps"})
    # The registry's word first (the workflow's planning checks the same again before anything starts).
    row = await store.approved_artifact(db, body.artifact_id)
    try:
        artifact = check_artifact(approved_artifact_from_row(row) if row is not None else None, body.artifact_id)
    except InvalidWorkload as exc:
        raise ApiError(422, str(exc), code="invalid_upgrade", details={"field": exc.field}) from None
    # Another layout may take more GPUs per replica: those count against the owner team's quota (403 past it).
    taken = await quotas.claim_upgrade(workload_id, body, artifact, db=db, settings=settings)
    request = UpgradeRequest(**body.model_dump(exclude={"requested_by", "team"}), requested_by=principal.name,
                             team=principal.team)
    try:
        status = await workload_handle(temporal, workload_id).execute_update(upgrade_contract.UPDATE_UPGRADE, request,
                                                                                result_type=UpgradeStatus)
    except _UPDATE_ERRORS as err:
        await _give_back(taken, err, db)
        raise update_error(err, workload_id) from None
    return UpgradeAnswer(upgrade=status, workflow_url=workflow_ui_url(settings, workload_workflow_id(workload_id)))


async def control_upgrade(workload_id: str, verb: UpgradeVerb, reason: str | None, *, principal: Principal,
                          db: asyncpg.Pool, temporal: Client) -> UpgradeStatus:
    """Pause the running upgrade after its current step, resume it, or abort it (weights back, the new
    version removed)."""
    await own_workload(principal, db, temporal, workload_id, gone(workload_id))
    control = UpgradeControl(requested_by=principal.name, team=principal.team, reason=reason)
    try:
        return await workload_handle(temporal, workload_id).execute_update(_VERBS[verb], control,
                                                                           result_type=UpgradeStatus)
    except _UPDATE_ERRORS as err:
        raise update_error(err, workload_id) from None


async def delete(workload_id: str, *, principal: Principal, db: asyncpg.Pool, temporal: Client) -> WorkloadDeleting:
    """Delete it (its endpoints drain first, then it is torn down); answers once the workflow took the request."""
    await own_workload(principal, db, temporal, workload_id, gone(workload_id))
    handle = workload_handle(temporal, workload_id)
    try:
        await handle.start_update(workload_contract.UPDATE_DELETE,
                                  DeleteRequest(requested_by=principal.name, team=principal.team),
                                  wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    except _UPDATE_ERRORS as err:
        raise update_error(err, workload_id) from None
    return WorkloadDeleting(id=workload_id, state="deleting")


async def set_follow(workload_id: str, follow: Follow, *, principal: Principal, db: asyncpg.Pool) -> FollowPolicy:
    """`auto`: approving a newer draft of the workload's branch starts its progressive upgrade; `manual`: the
    approval only records that a newer version exists."""
    row = await store.get_workload(db, workload_id)
    not_found = ApiError(404, f"workload {workload_id} not found")
    if row is None:
        raise not_found
    hide(principal, "workload", workload_id, row["team"], not_found)
    if row["state"] in follow_store.NOT_FOLLOWING_STATES:
        raise ApiError(409, f"workload {workload_id} is {row['state']}: it follows nothing any more",
                       code="workload_not_live")
    await follow_store.set_follow(db, workload_id=workload_id, follow=follow, actor=principal.name,
                                  team=principal.team, step=f"follow-set:{uuid.uuid4().hex}")
    return FollowPolicy(workload_id=workload_id, follow=follow, set_by=principal.name)


# What sending an update can raise: refused or failed (its validator's or handler's words), the workflow
# unknown, or Temporal not answering in time (the update may still take effect: asking again is safe).
_UPDATE_ERRORS = (WorkflowUpdateFailedError, RPCError, RPCTimeoutOrCancelledError)


async def _give_back(taken: quotas.Claim, err: Exception, db: asyncpg.Pool) -> None:
    """The quota room an update took, given back when the workflow refused it or does not run; kept when
    Temporal did not answer in time (the update may still take effect)."""
    if not isinstance(err, RPCTimeoutOrCancelledError):
        await quotas.release(taken, db=db)


def update_error(err: Exception, workload_id: str) -> ApiError:
    if isinstance(err, WorkflowUpdateFailedError):
        cause = err.cause
        if isinstance(cause, ApplicationError):
            if cause.type in upgrade_contract.INVALID_UPGRADE:
                return ApiError(422, cause.message, code="invalid_upgrade", details={"reason": cause.type})
            return ApiError(409, cause.message, code="conflict", details={"reason": cause.type} if cause.type else None)
        return ApiError(409, str(cause or err), code="conflict")
    if isinstance(err, RPCTimeoutOrCancelledError):
        return ApiError(503, "Temporal did not answer in time; the request may still take effect: look at the "
                             "workload, or send it again (it is safe to repeat)")
    assert isinstance(err, RPCError)
    if err.status == RPCStatusCode.NOT_FOUND:
        return gone(workload_id)
    return ApiError(503, f"Temporal could not take the request: {err.message}")


def gone(workload_id: str) -> ApiError:
    """What an update to a workload that does not run answers, and so also one of another team."""
    return ApiError(404, f"workload {workload_id} not found or no longer running")


def _taken(workload_id: str) -> ApiError:
    return ApiError(409, f"workload id {workload_id} is taken; choose another name", code="workload_exists")

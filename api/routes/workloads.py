"""Workloads: create (validated against the approved draft; a dry run writes nothing), list, read,
scale and delete. The workload workflow does the work; these routes start it and talk to it."""

from __future__ import annotations

from typing import Any

import asyncpg
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from temporalio.client import (
    Client,
    RPCTimeoutOrCancelledError,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Operator, Principal, Viewer
from api.deps import DbDep, SettingsDep, TemporalDep
from api.errors import ApiError
from api.ownership import hide, listing_team, own_workload
from api.responses import WorkloadDeleting, WorkloadDetail, WorkloadList
from api.routes.clusters import DryRunRequest, dry_run
from contracts import upgrade as upgrade_contract
from contracts import workload as workload_contract
from contracts.ids import workload_workflow_id
from contracts.perf import TargetInput
from contracts.traffic_plan import TrafficPlanInput
from contracts.upgrade import UpgradeControl, UpgradeRequest, UpgradeStatus
from contracts.workload import DeleteRequest, ScaleRequest, WorkloadStatus
from wingsmith.config import Settings, perf_task_queue
from wingsmith.dynamo import render_dgd
from wingsmith.hardware import get_hardware
from wingsmith.recipes.files import catalog_of_draft
from wingsmith.starter import create_workload, workload_handle, workload_status
from wingsmith.store import clusters as cluster_store
from wingsmith.store import workloads as store
from wingsmith.target_plan import TargetChoice, choose_card
from wingsmith.target_workload import plan_first_runnable
from wingsmith.temporal import workflow_ui_url
from wingsmith.text import CommentText, SourceText
from wingsmith.traffic_plans import TooManyPlans, run_traffic_plan
from wingsmith.upgrade import steps_problem
from wingsmith.workloads import (
    ApprovedArtifact,
    InvalidWorkload,
    WorkloadPlan,
    WorkloadRequest,
    approved_artifact_from_row,
    check_artifact,
    plan_workload,
)

router = APIRouter(prefix="/v1/workloads", tags=["workloads"])


class Created(BaseModel):
    id: str
    workflow_id: str
    workflow_url: str
    plan: WorkloadPlan


class DryRun(BaseModel):
    dry_run: bool = True
    plan: WorkloadPlan
    placement: dict[str, Any]
    manifests: dict[str, dict[str, Any]] = Field(description="cluster → the DynamoGraphDeployment it would get")
    target_plan: TargetChoice | None = Field(None, description="with a traffic target: each candidate card's plan "
                                             "(configuration, replicas, GPUs, predicted TTFT/TPOT) and why it lost")


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


class UpgradeAnswer(BaseModel):
    upgrade: UpgradeStatus
    workflow_url: str


# Refusals about what was asked (422) and about the workload's state now (409).


@router.post("", status_code=202, response_model=Created | DryRun, summary="Create a workload (or dry-run it)")
async def create(body: WorkloadRequest, principal: Operator, db: DbDep, settings: SettingsDep,
                 request: Request) -> Created | DryRun:
    row = await store.approved_artifact(db, body.artifact_id)
    artifact = approved_artifact_from_row(row) if row is not None else None
    try:
        if artifact is None:
            raise InvalidWorkload(f"artifact {body.artifact_id} not found; register it first", field="artifact_id")
        # The catalog the approved draft's evidence came from: its flags are what the reviewer saw.
        catalog = catalog_of_draft(artifact.catalog_version, settings.catalogs_dir)
        choice = await _plan_for_target(body, artifact, db, settings, request, principal) if body.target else None
        image, namespace, secret = settings.vllm_runtime_image, settings.deploy_namespace, settings.hf_token_secret
        if choice is not None:
            # The first plan, in the choice's order, that the recipe and the fit check can run.
            plan, choice = plan_first_runnable(body, choice, artifact, catalog, image=image, namespace=namespace,
                                               hf_token_secret=secret)
        else:
            plan = plan_workload(body, artifact, catalog, image=image, namespace=namespace, hf_token_secret=secret)
    except InvalidWorkload as exc:
        raise ApiError(422, str(exc), code="invalid_workload",
                       details={"field": exc.field, **exc.details}) from None
    if body.dry_run:
        placed = await dry_run(DryRunRequest(plan=plan.placement), db, principal, request, settings)
        manifests = {cluster: render_dgd(plan.rollout_spec(cluster, n))
                     for cluster, n in placed.decision.replicas.items()}
        return DryRun(plan=plan, placement=placed.decision.model_dump(mode="json"), manifests=manifests,
                      target_plan=choice)
    temporal = _temporal(request)
    # Ids are global (they name the workflow): one another team holds answers 409 "taken" and nothing
    # more, where the same id of one's own team would return that workload (a repeated create).
    await own_workload(principal, db, temporal, plan.workload_id, _taken(plan.workload_id))
    handle = await create_workload(temporal, settings, plan=plan, requested_by=principal.name,
                                   repo_id=artifact.repo_id, team=principal.team)
    return Created(id=plan.workload_id, workflow_id=handle.id, workflow_url=workflow_ui_url(settings, handle.id),
                   plan=plan)


@router.get("", response_model=WorkloadList, response_model_exclude_unset=True,
            summary="List workloads (the caller's team's; an admin's: every team's)")
async def list_workloads(viewer: Viewer, db: DbDep, limit: int = Query(200, ge=1, le=1000)):
    return {"workloads": await store.list_workloads(db, limit=limit, team=listing_team(viewer))}


@router.get("/{workload_id}", response_model=WorkloadDetail, response_model_exclude_unset=True,
            summary="A workload: per-cluster state, DGD names, frontend URLs, events")
async def get_workload(workload_id: str, viewer: Viewer, db: DbDep, settings: SettingsDep,
                       request: Request) -> dict[str, Any]:
    row = await store.get_workload(db, workload_id)
    live = None
    temporal = getattr(request.app.state, "temporal", None)
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
    return out


@router.patch("/{workload_id}", response_model=WorkloadStatus, summary="Scale a workload")
async def scale(workload_id: str, body: ScaleBody, principal: Operator, temporal: TemporalDep,
                db: DbDep) -> WorkloadStatus:
    await own_workload(principal, db, temporal, workload_id, _gone(workload_id))
    handle = workload_handle(temporal, workload_id)
    try:
        return await handle.execute_update(workload_contract.UPDATE_SCALE, ScaleRequest(
            replicas=body.replicas, requested_by=principal.name, team=principal.team), result_type=WorkloadStatus)
    except _UPDATE_ERRORS as err:
        raise _update_error(err, workload_id) from None


@router.post("/{workload_id}/upgrade", status_code=202, response_model=UpgradeAnswer,
             summary="Upgrade a workload to another approved artifact, progressively (operator)")
async def upgrade(workload_id: str, body: UpgradeBody, principal: Operator, temporal: TemporalDep,
                  settings: SettingsDep, db: DbDep) -> UpgradeAnswer:
    await own_workload(principal, db, temporal, workload_id, _gone(workload_id))
    if (problem := steps_problem(body.steps)) is not None:
        raise ApiError(422, problem, code="invalid_upgrade", details={"field": "steps"})
    # The registry's word first (the workflow's planning checks the same again before anything starts).
    row = await store.approved_artifact(db, body.artifact_id)
    try:
        check_artifact(approved_artifact_from_row(row) if row is not None else None, body.artifact_id)
    except InvalidWorkload as exc:
        raise ApiError(422, str(exc), code="invalid_upgrade", details={"field": exc.field}) from None
    request = UpgradeRequest(**body.model_dump(exclude={"requested_by", "team"}), requested_by=principal.name,
                             team=principal.team)
    try:
        status = await workload_handle(temporal, workload_id).execute_update(upgrade_contract.UPDATE_UPGRADE, request,
                                                                                result_type=UpgradeStatus)
    except _UPDATE_ERRORS as err:
        raise _update_error(err, workload_id) from None
    return UpgradeAnswer(upgrade=status, workflow_url=workflow_ui_url(settings, workload_workflow_id(workload_id)))


async def _control(workload_id: str, verb: str, body: ControlBody | None, principal: Principal,
                   temporal: Client, db: asyncpg.Pool) -> UpgradeStatus:
    await own_workload(principal, db, temporal, workload_id, _gone(workload_id))
    update = {"pause": upgrade_contract.UPDATE_PAUSE, "resume": upgrade_contract.UPDATE_RESUME,
              "abort": upgrade_contract.UPDATE_ABORT}[verb]
    control = UpgradeControl(requested_by=principal.name, team=principal.team, reason=body.reason if body else None)
    try:
        return await workload_handle(temporal, workload_id).execute_update(update, control, result_type=UpgradeStatus)
    except _UPDATE_ERRORS as err:
        raise _update_error(err, workload_id) from None


@router.post("/{workload_id}/upgrade/pause", response_model=UpgradeStatus,
             summary="Pause the running upgrade after its current step (operator)")
async def pause_upgrade(workload_id: str, principal: Operator, temporal: TemporalDep, db: DbDep,
                        body: ControlBody | None = None) -> UpgradeStatus:
    return await _control(workload_id, "pause", body, principal, temporal, db)


@router.post("/{workload_id}/upgrade/resume", response_model=UpgradeStatus,
             summary="Resume a paused upgrade (operator)")
async def resume_upgrade(workload_id: str, principal: Operator, temporal: TemporalDep, db: DbDep,
                         body: ControlBody | None = None) -> UpgradeStatus:
    return await _control(workload_id, "resume", body, principal, temporal, db)


@router.post("/{workload_id}/upgrade/abort", response_model=UpgradeStatus,
             summary="Abort the running upgrade: weights back, the new version removed (operator)")
async def abort_upgrade(workload_id: str, principal: Operator, temporal: TemporalDep, db: DbDep,
                        body: ControlBody | None = None) -> UpgradeStatus:
    return await _control(workload_id, "abort", body, principal, temporal, db)


@router.delete("/{workload_id}", status_code=202, response_model=WorkloadDeleting,
               summary="Delete a workload (drains endpoints, then tears down)")
async def delete(workload_id: str, principal: Operator, temporal: TemporalDep, db: DbDep) -> WorkloadDeleting:
    await own_workload(principal, db, temporal, workload_id, _gone(workload_id))
    handle = workload_handle(temporal, workload_id)
    try:
        await handle.start_update(workload_contract.UPDATE_DELETE,
                                  DeleteRequest(requested_by=principal.name, team=principal.team),
                                  wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    except _UPDATE_ERRORS as err:
        raise _update_error(err, workload_id) from None
    return WorkloadDeleting(id=workload_id, state="deleting")


# What sending an update can raise: refused or failed (its validator's or handler's words), the workflow
# unknown, or Temporal not answering in time (the update may still take effect: asking again is safe).
_UPDATE_ERRORS = (WorkflowUpdateFailedError, RPCError, RPCTimeoutOrCancelledError)


def _update_error(err: Exception, workload_id: str) -> ApiError:
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
        return _gone(workload_id)
    return ApiError(503, f"Temporal could not take the request: {err.message}")


def _gone(workload_id: str) -> ApiError:
    """What an update to a workload that does not run answers, and so also one of another team."""
    return ApiError(404, f"workload {workload_id} not found or no longer running")


def _taken(workload_id: str) -> ApiError:
    return ApiError(409, f"workload id {workload_id} is taken; choose another name", code="workload_exists")


async def _plan_for_target(body: WorkloadRequest, artifact: ApprovedArtifact, db: asyncpg.Pool, settings: Settings,
                           request: Request, principal: Principal) -> TargetChoice:
    """AIConfigurator's plan per candidate card (the one asked for, then the cards the registered clusters
    that are not cordoned declare), through the perf queue; the chosen one (the cheapest per hour when every
    feasible card has a price, else the fewest GPUs), or a 422 naming the best each card reaches; a 429 with
    Retry-After when the caller's team already has its bound of plans in flight (wingsmith/traffic_plans.py)."""
    assert body.target is not None
    offer = cluster_store.fleet_offer(await cluster_store.list_clusters(db))
    cards = list(dict.fromkeys([get_hardware(body.hardware).id, *offer]))
    prices = {card: price for card, price in offer.items() if price is not None}
    ask = TargetInput(model=artifact.repo_id, model_commit=artifact.sha, config=artifact.config, cards=cards[:16],
                      target=body.target)
    try:
        # An identical plan in flight is joined; the team's own plans in flight are bounded (fair between teams).
        answer = await run_traffic_plan(
            _temporal(request), TrafficPlanInput(ask=ask, perf_task_queue=perf_task_queue(settings.task_queue)),
            team=principal.team, bound=settings.traffic_plans_per_team, task_queue=settings.task_queue)
    except TooManyPlans as exc:
        raise ApiError(429, str(exc), code="too_many_plans", details={"team": exc.team, "bound": exc.bound},
                       headers={"Retry-After": str(exc.retry_after)}) from None
    except WorkflowFailureError as exc:
        raise ApiError(503, f"the traffic plan ended without an answer: {exc.cause or exc}; ask again",
                       code="perf_unavailable") from None
    except RPCError as exc:
        raise ApiError(503, f"Temporal could not take the traffic plan: {exc.message}") from None
    if answer.unavailable:
        raise ApiError(503, answer.unavailable, code="perf_unavailable")
    choice = choose_card(answer.plans, prices)
    if choice.chosen is None:
        raise ApiError(422, choice.refusal or "no card meets the target", code="target_unreachable",
                       details={"candidates": [c.model_dump(mode="json") for c in choice.candidates]})
    return choice


def _temporal(request: Request):
    client = getattr(request.app.state, "temporal", None)
    if client is None:
        raise ApiError(503, "Temporal is not reachable")
    return client

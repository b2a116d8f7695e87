"""Workloads: create (validated against the approved draft; a dry run writes nothing; sized by traffic, 202
with where to follow the plan), list, read, scale, upgrade and delete (the use cases:
api/services/workloads.py, planning.py, target_plans.py). The workload workflow does the work."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from api.auth import Approver, Operator, Viewer
from api.deps import DbDep, LiveReadsDep, MaybeTemporalDep, SettingsDep, TemporalDep
from api.responses import (
    Autoscaling,
    Created,
    DryRun,
    Planning,
    UpgradeAnswer,
    WorkloadDeleting,
    WorkloadDetail,
    WorkloadList,
)
from api.services import autoscaling as autoscaling_service
from api.services import target_plans
from api.services import workloads as service
from api.services.workloads import ControlBody, PatchBody, UpgradeBody
from contracts.autoscaler import AutoscalerStatus
from contracts.upgrade import UpgradeStatus
from contracts.workload import WorkloadStatus
from wingsmith.domain.text import CommentText
from wingsmith.domain.workloads import WorkloadRequest


class ApprovalBody(BaseModel):
    tick: int = Field(ge=1, description="the decision waiting (`waiting.tick` in GET .../autoscaling)")
    approve: bool = True
    comment: CommentText = ""


router = APIRouter(prefix="/v1/workloads", tags=["workloads"])
# What a follower of a plan is told to wait between two looks (Retry-After).
FOLLOW_EVERY_SECONDS = 2


@router.post("", status_code=202, response_model=Created | DryRun | Planning,
             summary="Create a workload (or dry-run it); sized by traffic, 202 with where to follow the plan")
async def create(body: WorkloadRequest, principal: Operator, db: DbDep, settings: SettingsDep,
                 request: Request, response: Response, temporal: MaybeTemporalDep,
                 live_reads: LiveReadsDep) -> Created | DryRun | Planning:
    answer = await service.create(body, principal=principal, db=db, temporal=temporal, settings=settings,
                                  live_reads=live_reads, wait=asked_wait(request))
    if isinstance(answer, Planning):
        # Not ready within the caller's patience: where to follow it, as RFC 9110's 202 suggests.
        response.headers["Location"] = answer.status_url
        response.headers["Preference-Applied"] = "respond-async"
    return answer


def asked_wait(request: Request) -> float:
    """How long the caller waits for a traffic plan before it is answered with where to follow it, in RFC
    7240's words: `Prefer: respond-async` (what the CLI and the console send) answers within a few seconds,
    `Prefer: wait=<seconds>` waits that long; neither waits for the plan itself, as `/v1` always did
    (docs/compatibility.md: an answer's meaning does not change within `/v1`)."""
    wait: float | None = None
    asynchronous = False
    for preference in request.headers.get("prefer", "").split(","):
        name, _, value = preference.strip().partition("=")
        name = name.strip().lower()
        if name == "respond-async":
            asynchronous = True
        elif name == "wait":
            try:
                wait = float(value.strip().strip('"'))
            except ValueError:
                continue  # a wait that is no number is ignored, as RFC 7240 says of preferences not understood
    if wait is not None:
        return wait
    return target_plans.ANSWER_WITHIN_SECONDS if asynchronous else target_plans.PLAN_TIMEOUT.total_seconds()


@router.get("/plans/{ticket}", response_model=DryRun | Planning,
            summary="A traffic plan's status: how far it is, then the dry-run's answer (as POST gives it)")
async def plan_status(ticket: str, operator: Operator, db: DbDep, settings: SettingsDep, response: Response,
                      temporal: MaybeTemporalDep, live_reads: LiveReadsDep) -> DryRun | Planning:
    """The status URL a workload sized by traffic answers with while AIConfigurator plans it. While the plan
    runs: `state: planning` and its progress; then the very answer `POST /v1/workloads` gives the same request
    as a dry-run (or its refusal: 422 `target_unreachable` with what each card reaches, 503 without a perf
    worker). The plan is the workflow `workflow_id` names (visible in the Temporal UI)."""
    answer = await service.plan_status(ticket, principal=operator, db=db, temporal=temporal, settings=settings,
                                       live_reads=live_reads)
    if isinstance(answer, Planning):
        response.headers["Retry-After"] = str(FOLLOW_EVERY_SECONDS)
    return answer


@router.get("", response_model=WorkloadList, response_model_exclude_unset=True,
            summary="List workloads (the caller's team's; an admin's: every team's)")
async def list_workloads(viewer: Viewer, db: DbDep, limit: int = Query(200, ge=1, le=1000)) -> WorkloadList:
    return WorkloadList(workloads=await service.list_workloads(viewer, db=db, limit=limit))


@router.get("/{workload_id}", response_model=WorkloadDetail, response_model_exclude_unset=True,
            summary="A workload: per-cluster state, DGD names, frontend URLs, events")
async def get_workload(workload_id: str, viewer: Viewer, db: DbDep, settings: SettingsDep,
                       temporal: MaybeTemporalDep) -> WorkloadDetail:
    return await service.get_workload(workload_id, viewer=viewer, db=db, temporal=temporal, settings=settings)


@router.patch("/{workload_id}", response_model=WorkloadStatus,
              summary="Scale a workload, or set (null: remove) its autoscaling policy")
async def scale(workload_id: str, body: PatchBody, principal: Operator, temporal: TemporalDep,
                db: DbDep, settings: SettingsDep) -> WorkloadStatus:
    return await service.patch(workload_id, body, principal=principal, db=db, temporal=temporal, settings=settings)


@router.get("/{workload_id}/autoscaling", response_model=Autoscaling,
            summary="A workload's autoscaling policy and its autoscaler's last decisions, with their inputs")
async def autoscaling(workload_id: str, viewer: Viewer, db: DbDep, settings: SettingsDep,
                      temporal: MaybeTemporalDep, limit: int = Query(50, ge=1, le=500)) -> Autoscaling:
    return await autoscaling_service.show(workload_id, viewer=viewer, db=db, temporal=temporal, settings=settings,
                                          limit=limit)


@router.post("/{workload_id}/autoscaling/approve", response_model=AutoscalerStatus,
             summary="Approve (or reject) the autoscaler's scale-out waiting past the team's budget (approver: the "
                     "budget is an admin's, so the operators whose workload scales do not lift it themselves)")
async def approve_autoscaling(workload_id: str, body: ApprovalBody, principal: Approver, temporal: TemporalDep,
                              db: DbDep) -> AutoscalerStatus:
    return await autoscaling_service.approve(workload_id, body.tick, approve=body.approve, comment=body.comment,
                                             principal=principal, db=db, temporal=temporal)


@router.post("/{workload_id}/upgrade", status_code=202, response_model=UpgradeAnswer,
             summary="Upgrade a workload to another approved artifact, progressively (operator)")
async def upgrade(workload_id: str, body: UpgradeBody, principal: Operator, temporal: TemporalDep,
                  settings: SettingsDep, db: DbDep) -> UpgradeAnswer:
    return await service.upgrade(workload_id, body, principal=principal, db=db, temporal=temporal, settings=settings)


@router.post("/{workload_id}/upgrade/pause", response_model=UpgradeStatus,
             summary="Pause the running upgrade after its current step (operator)")
async def pause_upgrade(workload_id: str, principal: Operator, temporal: TemporalDep, db: DbDep,
                        body: ControlBody | None = None) -> UpgradeStatus:
    return await service.control_upgrade(workload_id, "pause", body.reason if body else None, principal=principal,
                                         db=db, temporal=temporal)


@router.post("/{workload_id}/upgrade/resume", response_model=UpgradeStatus,
             summary="Resume a paused upgrade (operator)")
async def resume_upgrade(workload_id: str, principal: Operator, temporal: TemporalDep, db: DbDep,
                         body: ControlBody | None = None) -> UpgradeStatus:
    return await service.control_upgrade(workload_id, "resume", body.reason if body else None, principal=principal,
                                         db=db, temporal=temporal)


@router.post("/{workload_id}/upgrade/abort", response_model=UpgradeStatus,
             summary="Abort the running upgrade: weights back, the new version removed (operator)")
async def abort_upgrade(workload_id: str, principal: Operator, temporal: TemporalDep, db: DbDep,
                        body: ControlBody | None = None) -> UpgradeStatus:
    return await service.control_upgrade(workload_id, "abort", body.reason if body else None, principal=principal,
                                         db=db, temporal=temporal)


@router.delete("/{workload_id}", status_code=202, response_model=WorkloadDeleting,
               summary="Delete a workload (drains endpoints, then tears down)")
async def delete(workload_id: str, principal: Operator, temporal: TemporalDep, db: DbDep) -> WorkloadDeleting:
    return await service.delete(workload_id, principal=principal, db=db, temporal=temporal)

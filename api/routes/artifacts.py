"""Artifacts: register (starts the review workflow), list, read, and review a draft (the use cases:
api/services/artifacts.py, estimates.py).

An artifact id is `<org>/<name>@<sha>`, so routes take it as two path segments."""

from __future__ import annotations

from fastapi import APIRouter, Query

from api.auth import Approver, Operator, Viewer
from api.deps import DbDep, MaybeTemporalDep, ProposalsDep, SettingsDep, TemporalDep, TokensDep
from api.responses import ArtifactDetail, ArtifactList, EstimatesAsked, Registered
from api.services import artifacts as service
from api.services.artifacts import RegisterRequest, artifact_id_of
from api.services.estimates import ask_for_estimates as ask
from contracts.artifact import ArtifactStatus
from wingsmith.domain.review import ReviewDecision

router = APIRouter(prefix="/v1/artifacts", tags=["artifacts"])


@router.post("", status_code=202, response_model=Registered, summary="Register an artifact and start its review")
async def register(body: RegisterRequest, principal: Operator, settings: SettingsDep, temporal: TemporalDep,
                   db: DbDep, proposals: ProposalsDep, tokens: TokensDep) -> Registered:
    return await service.register(body, principal=principal, db=db, temporal=temporal, settings=settings,
                                  proposals=proposals, approvers=tokens.names_with("approver"))


@router.get("", response_model=ArtifactList, response_model_exclude_unset=True, summary="List artifacts")
async def list_artifacts(_viewer: Viewer, db: DbDep, state: str | None = Query(None), model: str | None = Query(
        None, description="a Hugging Face repo id, case-insensitive"), limit: int = Query(100, ge=1, le=1000)
        ) -> ArtifactList:
    return ArtifactList(artifacts=await service.list_artifacts(db, state=state, model=model, limit=limit))


@router.get("/{org}/{name_at_sha}", response_model=ArtifactDetail, response_model_exclude_unset=True,
            summary="An artifact: draft, evidence, sizing, warnings, state, decisions")
async def get_artifact(org: str, name_at_sha: str, _viewer: Viewer, db: DbDep, settings: SettingsDep,
                       temporal: MaybeTemporalDep) -> ArtifactDetail:
    return await service.get_artifact(artifact_id_of(org, name_at_sha), db=db, temporal=temporal, settings=settings)


@router.post("/{org}/{name_at_sha}/drafts/{version}/performance", status_code=202, response_model=EstimatesAsked,
             summary="Ask for a draft's performance estimates (a draft that predates them)")
async def ask_for_estimates(org: str, name_at_sha: str, version: int, _operator: Operator, db: DbDep,
                            settings: SettingsDep, temporal: TemporalDep) -> EstimatesAsked:
    """Starts the draft's performance workflow under its one id, so asking twice (or asking for a draft
    whose artifact workflow already asked) starts nothing new; the figures follow on the draft."""
    return await ask(artifact_id_of(org, name_at_sha), version, db=db, temporal=temporal, settings=settings)


@router.post("/{org}/{name_at_sha}/review", response_model=ArtifactStatus, summary="Approve or reject a draft")
async def review(org: str, name_at_sha: str, body: ReviewDecision, principal: Approver,
                 temporal: TemporalDep) -> ArtifactStatus:
    return await service.review(artifact_id_of(org, name_at_sha), body, principal=principal, temporal=temporal)

"""Artifacts: register (starts the review workflow), list, read, and review a draft.

An artifact id is `<org>/<name>@<sha>`, so routes take it as two path segments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Approver, Operator, TokenTable, Viewer
from api.deps import DbDep, SettingsDep, TemporalDep
from api.errors import ApiError
from api.responses import ArtifactDetail, ArtifactList
from api.routes.resolve import hub_error_to_api, resolver_for
from contracts import artifact as artifact_contract
from contracts import draft_performance as perf_contract
from contracts.artifact import ArtifactStatus, ReviewPolicy
from contracts.draft_performance import DraftPerformanceInput, performance_workflow_id
from contracts.ids import artifact_workflow_id_of
from wingsmith.config import Settings, perf_task_queue
from wingsmith.draft_performance import NOT_ASKED, PENDING, DraftPerformance, stored_draft_requests
from wingsmith.hub import HubError, InvalidSource, parse_source
from wingsmith.recipes import Catalog
from wingsmith.recipes.files import load_catalog_version
from wingsmith.review import HTTP_STATUS, ReviewDecision, ReviewRequest
from wingsmith.starter import artifact_handle, artifact_status, register_artifact, review_policy
from wingsmith.store import artifacts as store
from wingsmith.temporal import workflow_ui_url
from wingsmith.text import SourceText
from wingsmith.watch import draft_diff

router = APIRouter(prefix="/v1/artifacts", tags=["artifacts"])
# The artifact workflow starts a draft's estimates right after saving it: a draft older than this without a
# performance workflow never had one (it predates estimates).
ASKED_WITHIN = timedelta(minutes=5)


class RegisterRequest(BaseModel):
    source: SourceText = Field(description="hf:<org>/<name>[@<revision>], a huggingface.co URL, or <org>/<name>",
                               examples=["hf:moonshotai/Kimi-K3"])


class Registered(BaseModel):
    id: str
    workflow_id: str
    workflow_url: str
    sha: str
    revision: str
    started: bool = Field(description="false when this artifact already existed (the call was a repeat)")


@router.post("", status_code=202, response_model=Registered, summary="Register an artifact and start its review")
async def register(request: Request, body: RegisterRequest, principal: Operator, settings: SettingsDep,
                   temporal: TemporalDep, db: DbDep) -> Registered:
    try:
        source = parse_source(body.source)
    except InvalidSource as exc:
        raise ApiError(422, str(exc), code="invalid_source", details={"source": body.source}) from None
    try:
        # Resolving here pins the branch to a sha, which names the workflow; the workflow resolves
        # again at that sha (a cache hit) so its history holds the proposal it reviewed.
        proposal = await run_in_threadpool(resolver_for(request).resolve, source, fresh=True)
    except HubError as exc:
        raise hub_error_to_api(exc) from None
    # The Hub answers any spelling of a repo id with its canonical one, and that names the artifact:
    # `hf:OPENAI/GPT-OSS-20b` is the same model as `openai/gpt-oss-20b`, with one workflow and one review.
    source = source.model_copy(update={"repo_id": proposal.repo_id})
    decided = await store.decided_artifact(db, proposal.repo_id, proposal.sha)
    if decided is not None:
        # Decided already (under this spelling or, before ids were canonical, another): a decision stands.
        return Registered(id=decided["id"], workflow_id=decided["workflow_id"],
                          workflow_url=workflow_ui_url(settings, decided["workflow_id"]), sha=decided["sha"],
                          revision=decided["revision"], started=False)
    started = await register_artifact(temporal, settings, source=source, sha=proposal.sha,
                                      requested_by=principal.name, policy=review_policy_for(request, settings),
                                      team=principal.team)
    return Registered(id=started.id, workflow_id=started.workflow_id,
                      workflow_url=workflow_ui_url(settings, started.workflow_id), sha=started.sha,
                      revision=started.revision, started=started.started)


@router.get("", response_model=ArtifactList, response_model_exclude_unset=True, summary="List artifacts")
async def list_artifacts(_viewer: Viewer, db: DbDep, state: str | None = Query(None), model: str | None = Query(
        None, description="a Hugging Face repo id, case-insensitive"), limit: int = Query(100, ge=1, le=1000)):
    return {"artifacts": await store.list_artifacts(db, state=state, model=model, limit=limit)}


@router.get("/{org}/{name_at_sha}", response_model=ArtifactDetail, response_model_exclude_unset=True,
            summary="An artifact: draft, evidence, sizing, warnings, state, decisions")
async def get_artifact(org: str, name_at_sha: str, _viewer: Viewer, db: DbDep, settings: SettingsDep,
                       request: Request) -> dict[str, Any]:
    artifact = _artifact_id(org, name_at_sha)
    row = await store.get_artifact(db, artifact)
    live = await _live_status(request, artifact)
    if row is not None:
        out = row
    elif live is not None:
        out = {"id": artifact, "state": live.stage}
    else:
        raise ApiError(404, f"artifact {artifact} not found")
    out["workflow_id"] = artifact_workflow_id_of(artifact)
    out["workflow_url"] = workflow_ui_url(settings, out["workflow_id"])
    out["live"] = live.model_dump(mode="json") if live else None
    # A draft shows what it changes against the approved artifact it was opened from (recorded with it).
    base = ((row or {}).get("draft") or {}).get("diff_base")
    approved = await store.get_artifact(db, base) if base else None
    out["diff"] = draft_diff(approved, row, (draft_catalog(approved, settings), draft_catalog(row, settings))) \
        if approved and row else None
    if out.get("draft"):
        asked = await estimates_asked(getattr(request.app.state, "temporal", None), out["workflow_id"], out["draft"])
        out["draft"] = with_performance(out["draft"], asked=asked)
    return out


def with_performance(draft: dict[str, Any], *, asked: bool | None = None) -> dict[str, Any]:
    """The draft with its performance lifted out of the sizing document it is stored in (the draft's
    performance workflow writes it there after the draft): pending until the first answer, unless nobody
    ever asked for estimates (`asked` False: a draft that predates them), which is said instead."""
    sizing = dict(draft.get("sizing") or {})
    stored = sizing.pop("performance", None)
    if stored:
        performance = DraftPerformance.model_validate(stored)
    elif asked is False:
        performance = DraftPerformance(status="not_asked", reason=NOT_ASKED)
    else:
        performance = DraftPerformance(status="pending")
    reason = performance.reason or (PENDING if performance.status == "pending" else None)
    return {**draft, "sizing": sizing, "performance": [row.model_dump(mode="json") for row in performance.entries],
            "performance_status": performance.status, "performance_reason": reason}


async def estimates_asked(temporal: Client | None, artifact_workflow_id: str, draft: dict[str, Any]) -> bool | None:
    """Whether a performance workflow was ever started for a draft without figures: None when that cannot
    be told (a draft with figures needs no asking; Temporal unreachable; a draft younger than
    ASKED_WITHIN, whose artifact workflow may not have started its estimates yet). Read only."""
    saved = draft.get("created_at")
    if (draft.get("sizing") or {}).get("performance") or temporal is None or not isinstance(saved, datetime):
        return None
    if datetime.now(UTC) - saved < ASKED_WITHIN:
        return None
    try:
        await temporal.get_workflow_handle(performance_workflow_id(artifact_workflow_id, draft["version"])).describe()
        return True
    except RPCError as err:
        return False if err.status == RPCStatusCode.NOT_FOUND else None


class EstimatesAsked(BaseModel):
    workflow_id: str
    workflow_url: str
    started: bool = Field(description="false when the estimates had been asked already (the call was a repeat)")


@router.post("/{org}/{name_at_sha}/drafts/{version}/performance", status_code=202, response_model=EstimatesAsked,
             summary="Ask for a draft's performance estimates (a draft that predates them)")
async def ask_for_estimates(org: str, name_at_sha: str, version: int, _operator: Operator, db: DbDep,
                            settings: SettingsDep, temporal: TemporalDep) -> EstimatesAsked:
    """Starts the draft's performance workflow under its one id, so asking twice (or asking for a draft
    whose artifact workflow already asked) starts nothing new; the figures follow on the draft."""
    artifact = _artifact_id(org, name_at_sha)
    row = await store.get_artifact(db, artifact)
    draft = (row or {}).get("draft")
    if row is None or draft is None:
        raise ApiError(404, f"artifact {artifact} has no draft")
    if draft["version"] != version:
        raise ApiError(409, f"draft {version} is not the current draft of {artifact} (it is draft "
                       f"{draft['version']}): only the current draft is estimated", code="not_current_draft")
    try:
        requests = stored_draft_requests(row.get("proposal") or {}, draft.get("evidence") or {},
                                         draft.get("sizing") or {})
    except ValueError as err:
        raise ApiError(409, str(err), code="cannot_estimate") from None
    workflow_id = performance_workflow_id(row["workflow_id"], version)
    try:
        await temporal.start_workflow(
            perf_contract.WORKFLOW, DraftPerformanceInput(artifact_id=artifact, version=version, requests=requests,
                                                          perf_task_queue=perf_task_queue(settings.task_queue)),
            id=workflow_id, task_queue=settings.task_queue, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=f"Expected performance of {artifact}, draft {version} (asked for after the draft)")
        started = True
    except WorkflowAlreadyStartedError:
        started = False
    except RPCError as err:
        raise ApiError(503, f"Temporal could not start the estimates: {err.message}") from None
    return EstimatesAsked(workflow_id=workflow_id, workflow_url=workflow_ui_url(settings, workflow_id), started=started)


def draft_catalog(row: dict[str, Any], settings: Settings) -> Catalog | None:
    """The recipe catalog a registry row's draft was built from, when this plane holds it."""
    version = (row.get("draft") or {}).get("catalog_version")
    try:
        return load_catalog_version(version, settings.catalogs_dir) if version else None
    except (LookupError, ValueError):
        return None


@router.post("/{org}/{name_at_sha}/review", response_model=ArtifactStatus, summary="Approve or reject a draft")
async def review(org: str, name_at_sha: str, body: ReviewDecision, principal: Approver,
                 temporal: TemporalDep) -> ArtifactStatus:
    artifact = _artifact_id(org, name_at_sha)
    handle = artifact_handle(temporal, artifact)
    try:
        return await handle.execute_update(artifact_contract.UPDATE_REVIEW,
                                           ReviewRequest(**body.model_dump(), reviewer=principal.name),
                                           result_type=ArtifactStatus)
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError):
            raise ApiError(HTTP_STATUS.get(cause.type or "", 409), cause.message,
                           code=_snake(cause.type or "refused")) from None
        raise ApiError(409, str(cause or err), code="refused") from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            # The workflow is gone or finished: either there never was one, or it was decided.
            if await _exists(temporal, artifact):
                raise ApiError(409, f"{artifact} is no longer waiting for a review (already decided or expired)",
                               code="already_decided") from None
            raise ApiError(404, f"artifact {artifact} not found") from None
        raise ApiError(503, f"Temporal could not take the review: {err.message}") from None


def review_policy_for(request: Request, settings: Settings) -> ReviewPolicy:
    """The settings' review policy, plus the names a signal may decide under: the approvers of this
    plane's token table (names only; the tokens never leave the API). Approvers who sign in with OIDC
    cannot be listed (the issuer holds them), so a signal naming one is refused; they decide through the
    review API, whose token names them and where four-eyes compares that name with the registrant's."""
    tokens: TokenTable = request.app.state.tokens
    return review_policy(settings).model_copy(update={"signal_reviewers": tokens.names_with("approver")})


def _artifact_id(org: str, name_at_sha: str) -> str:
    name, sep, sha = name_at_sha.partition("@")
    if not sep or not name or not sha:
        raise ApiError(422, f"artifact ids look like <org>/<name>@<sha>, got {org}/{name_at_sha}",
                       code="invalid_artifact_id")
    return f"{org}/{name}@{sha}"


# A page or answer that adds the workflow's live status waits this long for it, then shows the registry's
# row: with no worker running, the server held the query for about 30 s and the draft page with it.
LIVE_STATUS_WAIT = timedelta(seconds=3)


async def _live_status(request: Request, artifact: str) -> ArtifactStatus | None:
    temporal = getattr(request.app.state, "temporal", None)
    if temporal is None:
        return None
    try:
        return await artifact_status(temporal, artifact, LIVE_STATUS_WAIT)
    except RPCError:
        return None
    except Exception:  # noqa: BLE001 - a status we cannot read must not break the page
        return None


async def _exists(temporal, artifact: str) -> bool:
    try:
        await artifact_handle(temporal, artifact).describe()
        return True
    except RPCError:
        return False


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")

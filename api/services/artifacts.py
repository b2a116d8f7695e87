"""Artifacts: register one (starts its review workflow), list them, read one with its draft, and review a
draft. Artifacts and their approvals belong to the organisation; an artifact id is `<org>/<name>@<sha>`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg
from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Principal
from api.errors import ApiError
from api.responses import ArtifactDetail, ArtifactSummary, Registered
from api.services.estimates import estimates_asked, with_performance
from api.services.proposals import Proposals, parse
from contracts import artifact as artifact_contract
from contracts.artifact import ArtifactStatus, ReviewPolicy
from contracts.ids import artifact_workflow_id_of
from wingsmith.adapters.recipes.files import load_catalog_version
from wingsmith.adapters.starter import artifact_handle, artifact_status, register_artifact, review_policy
from wingsmith.adapters.store import artifacts as store
from wingsmith.adapters.temporal import workflow_ui_url
from wingsmith.domain.config import Settings
from wingsmith.domain.recipes import Catalog
from wingsmith.domain.review import HTTP_STATUS, ReviewDecision, ReviewRequest
from wingsmith.domain.text import SourceText
from wingsmith.domain.watch import draft_diff

# A page or answer that adds the workflow's live status waits this long for it, then shows the registry's
# row: with no worker running, the server held the query for about 30 s and the draft page with it.
LIVE_STATUS_WAIT = timedelta(seconds=3)


class RegisterRequest(BaseModel):
    source: SourceText = Field(description="hf:<org>/<name>[@<revision>], a huggingface.co URL, or <org>/<name>",
                               examples=["hf:moonshotai/Kimi-K3"])


def artifact_id_of(org: str, name_at_sha: str) -> str:
    """The id from its two path segments (`<org>` and `<name>@<sha>`), or the 422 that says how it looks."""
    name, sep, sha = name_at_sha.partition("@")
    if not sep or not name or not sha:
        raise ApiError(422, f"artifact ids look like <org>/<name>@<sha>, got {org}/{name_at_sha}",
                       code="invalid_artifact_id")
    return f"{org}/{name}@{sha}"


async def register(body: RegisterRequest, *, principal: Principal, db: asyncpg.Pool, temporal: Client,
                   settings: Settings, proposals: Proposals, approvers: list[str]) -> Registered:
    """Register the model `body.source` names at the commit its revision points at now, and start its review;
    `approvers` are the names a review signal may decide under (see `review_policy_for`)."""
    source = parse(body.source)
    # Resolving here pins the branch to a sha, which names the workflow; the workflow resolves
    # again at that sha (a cache hit) so its history holds the proposal it reviewed.
    proposal = await proposals.pin(source)
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
                                      requested_by=principal.name, policy=review_policy_for(settings, approvers),
                                      team=principal.team)
    return Registered(id=started.id, workflow_id=started.workflow_id,
                      workflow_url=workflow_ui_url(settings, started.workflow_id), sha=started.sha,
                      revision=started.revision, started=started.started)


def review_policy_for(settings: Settings, approvers: list[str]) -> ReviewPolicy:
    """The settings' review policy, plus the names a signal may decide under: the approvers of this
    plane's token table (names only; the tokens never leave the API). Approvers who sign in with OIDC
    cannot be listed (the issuer holds them), so a signal naming one is refused; they decide through the
    review API, whose token names them and where four-eyes compares that name with the registrant's."""
    return review_policy(settings).model_copy(update={"signal_reviewers": approvers})


async def list_artifacts(db: asyncpg.Pool, *, state: str | None, model: str | None,
                         limit: int) -> list[ArtifactSummary]:
    return [ArtifactSummary.model_validate(row)
            for row in await store.list_artifacts(db, state=state, model=model, limit=limit)]


async def get_artifact(artifact: str, *, db: asyncpg.Pool, temporal: Client | None,
                       settings: Settings) -> ArtifactDetail:
    """The registry row with its latest draft (and its performance), review, events and what the draft
    changes, plus the workflow's live status; only the workflow's view while it has not written the row."""
    row = await store.get_artifact(db, artifact)
    live = await _live_status(temporal, artifact)
    out: dict[str, Any]
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
        asked = await estimates_asked(temporal, out["workflow_id"], out["draft"])
        out["draft"] = with_performance(out["draft"], asked=asked)
    return ArtifactDetail.model_validate(out)


def draft_catalog(row: dict[str, Any], settings: Settings) -> Catalog | None:
    """The recipe catalog a registry row's draft was built from, when this plane holds it."""
    version = (row.get("draft") or {}).get("catalog_version")
    try:
        return load_catalog_version(version, settings.catalogs_dir) if version else None
    except (LookupError, ValueError):
        return None


async def review(artifact: str, decision: ReviewDecision, *, principal: Principal, temporal: Client) -> ArtifactStatus:
    """Send the review update: approve or reject the draft, in the name of `principal`."""
    handle = artifact_handle(temporal, artifact)
    try:
        return await handle.execute_update(artifact_contract.UPDATE_REVIEW,
                                           ReviewRequest(**decision.model_dump(), reviewer=principal.name),
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


async def _live_status(temporal: Client | None, artifact: str) -> ArtifactStatus | None:
    if temporal is None:
        return None
    try:
        return await artifact_status(temporal, artifact, LIVE_STATUS_WAIT)
    except RPCError:
        return None
    except Exception:  # noqa: BLE001 - a status we cannot read must not break the page
        return None


async def _exists(temporal: Client, artifact: str) -> bool:
    try:
        await artifact_handle(temporal, artifact).describe()
        return True
    except RPCError:
        return False


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")

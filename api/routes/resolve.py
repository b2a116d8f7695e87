"""`GET /v1/artifacts/resolve?source=...`: propose an artifact from a Hugging Face model. Writes
nothing (no row, no workflow); only the Hub file cache under the plane's home grows."""

from __future__ import annotations

import threading

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from api.auth import Viewer
from api.errors import ApiError
from wingsmith.proposals import with_evidence_and_sizing
from wingsmith.hub import (ArtifactProposal, GatedRepo, HubError, HubRateLimited, HubTokenUnavailable,
                           HubUnavailable, InvalidSource, MissingConfig, RepoNotFound, Resolver, RevisionNotFound,
                           parse_source)

router = APIRouter(prefix="/v1/artifacts", tags=["artifacts"])
_resolver_lock = threading.Lock()


def resolver_for(request: Request) -> Resolver:
    """One resolver per app, so its proposal cache is shared by every request."""
    state = request.app.state
    with _resolver_lock:
        if getattr(state, "resolver", None) is None:
            settings = state.settings
            state.resolver = Resolver(settings.hf_endpoint, settings.hf_token_ref, settings.home_dir / "hf-cache")
    return state.resolver


@router.get("/resolve", response_model=ArtifactProposal,
            summary="Propose an artifact from a Hugging Face model (writes nothing)")
async def resolve(request: Request, _viewer: Viewer,
                  source: str = Query(..., description="hf:<org>/<name>[@<revision>], "
                                      "https://huggingface.co/<org>/<name>[/tree/<revision>] or <org>/<name>")):
    try:
        parsed = parse_source(source)
    except InvalidSource as exc:
        raise ApiError(422, str(exc), code="invalid_source", details={"source": source}) from None
    resolver = resolver_for(request)
    try:
        proposal = await run_in_threadpool(resolver.resolve, parsed)
    except HubError as exc:
        raise hub_error_to_api(exc) from None
    return await run_in_threadpool(with_evidence_and_sizing, proposal)


def hub_error_to_api(exc: HubError) -> ApiError:
    details = {"repo_id": exc.repo_id, "revision": exc.revision, "retryable": exc.retryable}
    if isinstance(exc, (RepoNotFound, RevisionNotFound)):
        code = "repo_not_found" if isinstance(exc, RepoNotFound) else "revision_not_found"
        return ApiError(404, exc.message, code=code, details=details)
    if isinstance(exc, GatedRepo):
        return ApiError(403, exc.message, code="gated_repo", details=details)
    if isinstance(exc, MissingConfig):
        return ApiError(422, exc.message, code="not_a_model", details=details)
    if isinstance(exc, HubRateLimited):
        headers = {"Retry-After": str(int(exc.retry_after))} if exc.retry_after else None
        return ApiError(503, exc.message, code="hub_rate_limited", details=details, headers=headers)
    if isinstance(exc, HubUnavailable):
        return ApiError(503, exc.message, code="hub_unavailable", details=details)
    if isinstance(exc, HubTokenUnavailable):
        return ApiError(503, exc.message, code="hub_token_unavailable", details=details)
    return ApiError(502, exc.message, code="hub_error", details=details)

"""`GET /v1/artifacts/resolve?source=...`: propose an artifact from a Hugging Face model. Writes
nothing (no row, no workflow); only the Hub file cache under the plane's home grows."""

from __future__ import annotations

import gzip
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NamedTuple, cast

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from api.auth import Viewer
from api.errors import ApiError
from wingsmith.hub import (
    ArtifactProposal,
    ConfigOutOfBounds,
    GatedRepo,
    HubError,
    HubFileTooLarge,
    HubRateLimited,
    HubTokenUnavailable,
    HubUnavailable,
    InvalidSource,
    MissingConfig,
    ModelSource,
    RepoNotFound,
    Resolver,
    RevisionNotFound,
    parse_source,
)
from wingsmith.proposals import with_evidence_and_sizing
from wingsmith.recipes.files import load_catalog

router = APIRouter(prefix="/v1/artifacts", tags=["artifacts"])
_resolver_lock = threading.Lock()


def resolver_for(request: Request) -> Resolver:
    """One resolver per app, so its proposal cache is shared by every request."""
    state = request.app.state
    resolver = getattr(state, "resolver", None)
    if resolver is not None:  # set once and never replaced: no lock needed to read it
        return resolver
    with _resolver_lock:
        if getattr(state, "resolver", None) is None:
            settings = state.settings
            state.resolver = Resolver(settings.hf_endpoint, settings.hf_token_ref, settings.home_dir / "hf-cache")
    return state.resolver


class _CachedAnswersFirst(APIRoute):
    """The resolve route, answering from the cache before FastAPI solves the route's dependency and
    query parameter: that machinery was a sixth of a cached resolve's time in the API, for one value
    read from the query string. The route's own dependency (`Viewer`) is called first, as FastAPI
    calls it first, so who may ask and the 401/403 they get are the route's; only then is the cache
    looked at. Anything but a cached answer (no `source`, an invalid one, one not cached) goes through
    the route as declared; with a `source`, that checks the token a second time (a dict lookup; for a
    sign-in token, a second signature check, beside a call to the Hub). A dependency added where this
    router is included would not be seen here: api/app.py includes it with none."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        declared = super().get_route_handler()
        # The route's one dependency, which takes the request; a second one fails here, as the route is
        # built, instead of being skipped.
        [dependency] = [d.call for d in self.dependant.dependencies]
        auth = cast(Callable[[Request], Awaitable[Any]], dependency)

        async def handler(request: Request) -> Response:
            source = request.query_params.get("source")  # the value FastAPI would pass (the last one)
            if source is not None:
                await auth(request)
                answer = _cached_answer(request, source)
                if answer is not None:
                    return _respond(request, answer)
            return await declared(request)
        return handler


async def resolve(request: Request, _viewer: Viewer,
                  source: str = Query(..., description="hf:<org>/<name>[@<revision>], "
                                      "https://huggingface.co/<org>/<name>[/tree/<revision>] or <org>/<name>")):
    return _respond(request, await _answer(request, source))


# `router.get` takes no route class; this is what it does, with one.
router.add_api_route("/resolve", resolve, methods=["GET"], response_model=ArtifactProposal,
                     summary="Propose an artifact from a Hugging Face model (writes nothing)",
                     route_class_override=_CachedAnswersFirst)


async def propose(request: Request, source: str) -> ArtifactProposal:
    """The proposal `GET /v1/artifacts/resolve` answers, as a model (for the console's pages)."""
    return ArtifactProposal.model_validate_json((await _answer(request, source)).raw)


async def _answer(request: Request, source: str) -> _Answer:
    try:
        parsed = parse_source(source)
    except InvalidSource as exc:
        raise ApiError(422, str(exc), code="invalid_source", details={"source": source}) from None
    proposal, answer = _cached(request, parsed)
    if answer is not None:
        return answer
    if proposal is None:
        try:
            proposal = await run_in_threadpool(resolver_for(request).resolve, parsed)
        except HubError as exc:
            raise hub_error_to_api(exc) from None
    enriched = await run_in_threadpool(with_evidence_and_sizing, proposal)
    # The enrichment is shared by every revision naming that commit; the answer names the one asked for.
    if enriched.revision != proposal.revision:
        enriched = enriched.model_copy(update={"revision": proposal.revision})
    raw = enriched.model_dump_json().encode()
    answer = _Answer(raw, gzip.compress(raw, compresslevel=6, mtime=0))
    _answers(request).put(_answer_key(proposal), answer)
    return answer


def _cached(request: Request, parsed: ModelSource) -> tuple[ArtifactProposal | None, _Answer | None]:
    """The proposal and its serialised answer, each if cached. Runs on the event loop: a dict lookup
    in the resolver, one in the answers already serialised, no thread hop, no await, so no lock is held
    across one."""
    proposal = resolver_for(request).cached(parsed)
    return proposal, None if proposal is None else _answers(request).get(_answer_key(proposal))


def _cached_answer(request: Request, source: str) -> _Answer | None:
    """The serialised answer for `source` if cached; None also for an invalid source (`_answer` says why)."""
    try:
        parsed = parse_source(source)
    except InvalidSource:
        return None
    return _cached(request, parsed)[1]


class _Answer(NamedTuple):
    raw: bytes
    gzipped: bytes  # compressed once, when cached: a proposal is tens of KB of JSON, a fifth of it gzipped


def _respond(request: Request, answer: _Answer) -> Response:
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(answer.gzipped, media_type="application/json",
                        headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
    return Response(answer.raw, media_type="application/json", headers={"Vary": "Accept-Encoding"})


class _Answers:
    """Serialised resolve answers by (repo, commit, revision, catalog version): a commit's answer never
    changes for one catalog. Bounded, least recently used out first."""

    def __init__(self, limit: int = 512):
        self._limit = limit
        self._items: OrderedDict[tuple[str, str, str, str], _Answer] = OrderedDict()

    def get(self, key: tuple[str, str, str, str]) -> _Answer | None:
        answer = self._items.get(key)
        if answer is not None:
            self._items.move_to_end(key)
        return answer

    def put(self, key: tuple[str, str, str, str], answer: _Answer) -> None:
        self._items[key] = answer
        self._items.move_to_end(key)
        while len(self._items) > self._limit:
            self._items.popitem(last=False)


def _answers(request: Request) -> _Answers:
    state = request.app.state
    answers = getattr(state, "resolve_answers", None)
    if answers is None:  # only the event loop's thread gets here: no lock needed
        answers = state.resolve_answers = _Answers()
    return answers


def _answer_key(proposal: ArtifactProposal) -> tuple[str, str, str, str]:
    return proposal.repo_id.lower(), proposal.sha, proposal.revision, load_catalog().version


def hub_error_to_api(exc: HubError) -> ApiError:
    details = {"repo_id": exc.repo_id, "revision": exc.revision, "retryable": exc.retryable}
    if isinstance(exc, (RepoNotFound, RevisionNotFound)):
        code = "repo_not_found" if isinstance(exc, RepoNotFound) else "revision_not_found"
        return ApiError(404, exc.message, code=code, details=details)
    if isinstance(exc, GatedRepo):
        return ApiError(403, exc.message, code="gated_repo", details=details)
    if isinstance(exc, ConfigOutOfBounds):
        return ApiError(422, exc.message, code="invalid_config", details={**details, "field": exc.field})
    if isinstance(exc, MissingConfig):
        return ApiError(422, exc.message, code="not_a_model", details=details)
    if isinstance(exc, HubFileTooLarge):
        return ApiError(422, exc.message, code="hub_file_too_large", details=details)
    if isinstance(exc, HubRateLimited):
        headers = {"Retry-After": str(int(exc.retry_after))} if exc.retry_after else None
        return ApiError(503, exc.message, code="hub_rate_limited", details=details, headers=headers)
    if isinstance(exc, HubUnavailable):
        return ApiError(503, exc.message, code="hub_unavailable", details=details)
    if isinstance(exc, HubTokenUnavailable):
        return ApiError(503, exc.message, code="hub_token_unavailable", details=details)
    return ApiError(502, exc.message, code="hub_error", details=details)

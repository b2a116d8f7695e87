"""Proposals: what `GET /v1/artifacts/resolve` answers for a Hugging Face model, and the resolves that
registering and the console's pages make. Writes nothing (no row, no workflow); only the Hub file cache
under the plane's home grows.

One `Proposals` per API process (api/deps.py): the resolver's proposal cache and the answers already
serialised are shared by every request."""

from __future__ import annotations

import gzip
from collections import OrderedDict
from typing import NamedTuple

from starlette.concurrency import run_in_threadpool

from api.errors import ApiError
from wingsmith.adapters.hub.resolver import MissingConfig, Resolver
from wingsmith.adapters.proposals import with_evidence_and_sizing
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.hub import (
    ArtifactProposal,
    ConfigOutOfBounds,
    GatedRepo,
    HubError,
    HubFileTooLarge,
    HubRateLimited,
    HubTokenUnavailable,
    HubUnavailable,
    InvalidSource,
    ModelSource,
    RepoNotFound,
    RevisionNotFound,
    parse_source,
)


class Answer(NamedTuple):
    raw: bytes
    gzipped: bytes  # compressed once, when cached: a proposal is tens of KB of JSON, a fifth of it gzipped


class Answers:
    """Serialised resolve answers by (repo, commit, revision, catalog version): a commit's answer never
    changes for one catalog. Bounded, least recently used out first. Used from the event loop's thread only."""

    def __init__(self, limit: int = 512):
        self._limit = limit
        self._items: OrderedDict[tuple[str, str, str, str], Answer] = OrderedDict()

    def get(self, key: tuple[str, str, str, str]) -> Answer | None:
        answer = self._items.get(key)
        if answer is not None:
            self._items.move_to_end(key)
        return answer

    def put(self, key: tuple[str, str, str, str], answer: Answer) -> None:
        self._items[key] = answer
        self._items.move_to_end(key)
        while len(self._items) > self._limit:
            self._items.popitem(last=False)


class Proposals:
    """The process's resolver and its serialised answers."""

    def __init__(self, resolver: Resolver, answers: Answers):
        self.resolver = resolver
        self.answers = answers

    async def answer(self, source: str) -> Answer:
        """The resolve answer for `source`, serialised (from the cache when it holds it)."""
        parsed = parse(source)
        proposal, answer = self._cached(parsed)
        if answer is not None:
            return answer
        if proposal is None:
            try:
                proposal = await run_in_threadpool(self.resolver.resolve, parsed)
            except HubError as exc:
                raise hub_error_to_api(exc) from None
        enriched = await run_in_threadpool(with_evidence_and_sizing, proposal)
        # The enrichment is shared by every revision naming that commit; the answer names the one asked for.
        if enriched.revision != proposal.revision:
            enriched = enriched.model_copy(update={"revision": proposal.revision})
        raw = enriched.model_dump_json().encode()
        answer = Answer(raw, gzip.compress(raw, compresslevel=6, mtime=0))
        self.answers.put(_answer_key(proposal), answer)
        return answer

    async def propose(self, source: str) -> ArtifactProposal:
        """The proposal `GET /v1/artifacts/resolve` answers, as a model (for the console's pages)."""
        return ArtifactProposal.model_validate_json((await self.answer(source)).raw)

    def cached_answer(self, source: str) -> Answer | None:
        """The serialised answer for `source` if cached; None also for an invalid source (`answer` says why).
        Runs on the event loop: a dict lookup in the resolver, one in the answers, no thread hop, no await."""
        try:
            parsed = parse_source(source)
        except InvalidSource:
            return None
        return self._cached(parsed)[1]

    async def pin(self, source: ModelSource) -> ArtifactProposal:
        """A fresh resolve (the branch's commit now, not a cached one): what registering names its artifact by."""
        try:
            return await run_in_threadpool(self.resolver.resolve, source, fresh=True)
        except HubError as exc:
            raise hub_error_to_api(exc) from None

    def _cached(self, parsed: ModelSource) -> tuple[ArtifactProposal | None, Answer | None]:
        proposal = self.resolver.cached(parsed)
        return proposal, None if proposal is None else self.answers.get(_answer_key(proposal))


def parse(source: str) -> ModelSource:
    """A source as typed, or the 422 that says why it is not one."""
    try:
        return parse_source(source)
    except InvalidSource as exc:
        raise ApiError(422, str(exc), code="invalid_source", details={"source": source}) from None


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

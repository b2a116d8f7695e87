"""Resolve a model source into an `ArtifactProposal` through the real `huggingface_hub` client.

Writes nothing except the Hub's own file cache. Retries: 429 after the advertised wait
(`RateLimit` / `Retry-After`); 5xx, timeouts and connection failures with exponential backoff;
other 4xx never. A (repo, sha) proposal never changes, so it is cached for good; a branch → sha
answer is cached briefly, so a repeated resolve makes no Hub call."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import parse_ratelimit_headers
from pydantic import ValidationError

try:  # huggingface_hub 1.x/2.x speak httpx2; keep working if that ever changes back
    import httpx2 as _httpx
except ImportError:  # pragma: no cover
    import httpx as _httpx  # type: ignore[no-redef]  # the same API under its older name

from wingsmith.adapters.hub import token as hub_token
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.payloads import HUB_FILE_LIMIT, over_limit
from wingsmith.domain.hub.config_schema import ConfigRefused, check_config
from wingsmith.domain.hub.errors import (
    ConfigOutOfBounds,
    GatedRepo,
    HubAnswerInvalid,
    HubError,
    HubFileTooLarge,
    HubRateLimited,
    HubUnavailable,
    RepoNotFound,
    RevisionNotFound,
)
from wingsmith.domain.hub.proposal import ArtifactProposal, HubFacts, HubFile, build_proposal
from wingsmith.domain.hub.source import ModelSource, parse_source

log = get_logger("wingsmith.hub")
T = TypeVar("T")


class MissingConfig(HubError):
    """The repository has no config.json at that commit: not a model Wingsmith can serve."""


class InvalidConfig(MissingConfig):
    """config.json is there but is not a JSON object: as unservable as a missing one, and no retry helps."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3                  # tries for 5xx / timeouts / connection failures
    backoff: float = 0.5               # first wait, doubled each time
    max_backoff: float = 4.0
    rate_limit_retries: int = 3
    max_rate_limit_wait: float = 60.0  # a longer advertised wait is handed back to the caller


class Resolver:
    def __init__(self, endpoint: str, token_ref: str | None, cache_dir: Path, *, timeout: float = 10.0,
                 retry: RetryPolicy = RetryPolicy(), branch_ttl: float = 60.0, max_cached: int = 512,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 max_file_bytes: int = HUB_FILE_LIMIT):
        self.endpoint = endpoint.rstrip("/")
        self.token_ref = token_ref
        self.cache_dir = Path(cache_dir)
        self.timeout = timeout
        self.retry = retry
        self.branch_ttl = branch_ttl
        self.max_file_bytes = max_file_bytes
        self._max_cached = max_cached
        self._sleep, self._clock = sleep, clock
        self._lock = threading.Lock()
        self._proposals: OrderedDict[tuple[str, str], ArtifactProposal] = OrderedDict()
        self._branches: dict[tuple[str, str], tuple[str, float]] = {}

    # -- public ----------------------------------------------------------------------------------
    def resolve(self, source: str | ModelSource, *, fresh: bool = False) -> ArtifactProposal:
        """`fresh` asks the Hub where a branch points now instead of trusting the brief branch cache
        (registering pins a commit, so it must not pin a stale one); (repo, sha) answers stay cached."""
        src = source if isinstance(source, ModelSource) else parse_source(source)
        started = time.perf_counter()
        cached = None if fresh and not src.pinned else self._cached(src)
        if cached is not None:
            return cached
        token = hub_token.read_token(self.token_ref)
        try:
            try:
                facts = self._model_info(src, token)
                proposal = self._lookup(src.repo_id, facts.sha)
                if proposal is None:
                    config, index_total = self._config(facts, token)
                    proposal = build_proposal(facts, config, revision=src.revision, index_total_size=index_total)
                    self._store(src.repo_id, facts.sha, proposal)
            except (ValidationError, RecursionError, TypeError, KeyError, AttributeError) as exc:
                # The Hub's answer is not shaped as documented (a card's licence as an object, tags as
                # numbers, metadata nested past the reader's stack): data, so a refusal and no retry.
                raise HubAnswerInvalid(f"the Hub's answer for {src.repo_id}@{src.revision} is malformed: "
                                       f"{_first_problem(exc)}", repo_id=src.repo_id, revision=src.revision) from None
        except HubError as exc:
            _redact(exc, token)
            log.info("hub.resolve.failed", repo=src.repo_id, revision=src.revision,
                     error=type(exc).__name__, message=exc.message)
            raise
        if not src.pinned:
            with self._lock:
                self._branches[(src.repo_id.lower(), src.revision)] = (facts.sha, self._clock() + self.branch_ttl)
        log.info("hub.resolved", repo=src.repo_id, revision=src.revision, sha=facts.sha,
                 weight_bytes=proposal.weight_bytes, ms=round((time.perf_counter() - started) * 1000, 1))
        return proposal if proposal.revision == src.revision else proposal.model_copy(update={"revision": src.revision})

    def cached(self, source: str | ModelSource) -> ArtifactProposal | None:
        """The answer when no Hub call is needed (a commit seen before, a branch asked within
        `branch_ttl`), else None. Does no I/O and holds its lock for a dict lookup only, so an event
        loop may call it directly."""
        return self._cached(source if isinstance(source, ModelSource) else parse_source(source))

    # -- cache -----------------------------------------------------------------------------------
    def _cached(self, src: ModelSource) -> ArtifactProposal | None:
        repo = src.repo_id.lower()
        with self._lock:
            sha = src.revision if src.pinned else None
            if sha is None:
                hit = self._branches.get((repo, src.revision))
                if hit is None or hit[1] < self._clock():
                    return None
                sha = hit[0]
            proposal = self._proposals.get((repo, sha))
            if proposal is None:
                return None
            self._proposals.move_to_end((repo, sha))
        return proposal if proposal.revision == src.revision else proposal.model_copy(update={"revision": src.revision})

    def _lookup(self, repo_id: str, sha: str) -> ArtifactProposal | None:
        with self._lock:
            return self._proposals.get((repo_id.lower(), sha))

    def _store(self, repo_id: str, sha: str, proposal: ArtifactProposal) -> None:
        with self._lock:
            self._proposals[(repo_id.lower(), sha)] = proposal
            while len(self._proposals) > self._max_cached:
                self._proposals.popitem(last=False)

    # -- Hub calls -------------------------------------------------------------------------------
    def _model_info(self, src: ModelSource, token: str | None) -> HubFacts:
        api = HfApi(endpoint=self.endpoint, token=token or False)
        info = self._call(lambda: api.model_info(src.repo_id, revision=src.revision, files_metadata=True,
                                                 timeout=self.timeout),
                          src.repo_id, src.revision, token)
        card = info.card_data.to_dict() if info.card_data is not None else {}
        card_bytes = len(json.dumps(card, default=str).encode())
        if card_bytes > self.max_file_bytes:
            raise HubFileTooLarge(f"{info.id}@{info.sha}: " + over_limit("the model card's metadata", card_bytes,
                                                                         self.max_file_bytes),
                                  repo_id=info.id, revision=info.sha)
        st = info.safetensors
        return HubFacts(
            repo_id=info.id, sha=info.sha, private=bool(info.private), gated=info.gated or None,
            pipeline_tag=info.pipeline_tag, library=info.library_name, tags=info.tags or [], card=card,
            files=[HubFile(path=s.rfilename, size=s.size) for s in info.siblings or []],
            parameters=dict(st.parameters) if st else None, parameters_total=st.total if st else None,
            last_modified=info.last_modified)

    def _download_json(self, facts: HubFacts, filename: str, token: str | None,
                       invalid: type[HubError] = HubError) -> Any:
        # Refused before the download when the Hub gives the size, and after it when it does not.
        listed = next((f.size for f in facts.files if f.path == filename), None)
        self._within_limit(facts, filename, listed or 0)
        path = self._call(lambda: hf_hub_download(
            facts.repo_id, filename, revision=facts.sha, cache_dir=self.cache_dir, endpoint=self.endpoint,
            token=token or False, etag_timeout=self.timeout), facts.repo_id, facts.sha, token, filename=filename)
        self._within_limit(facts, filename, Path(path).stat().st_size)
        try:
            return json.loads(Path(path).read_text())
        except RecursionError:  # nesting deeper than the JSON reader's stack: bounded in size, not in depth
            raise ConfigOutOfBounds(f"{facts.repo_id}@{facts.sha}: {filename} nests too deep to read",
                                    repo_id=facts.repo_id, revision=facts.sha) from None
        except (OSError, ValueError) as exc:
            raise invalid(f"{facts.repo_id}@{facts.sha}: {filename} is not valid JSON ({exc})",
                          repo_id=facts.repo_id, revision=facts.sha) from None

    def _within_limit(self, facts: HubFacts, filename: str, size: int) -> None:
        if size > self.max_file_bytes:
            raise HubFileTooLarge(f"{facts.repo_id}@{facts.sha}: " + over_limit(filename, size, self.max_file_bytes),
                                  repo_id=facts.repo_id, revision=facts.sha)

    def _config(self, facts: HubFacts, token: str | None) -> tuple[dict, int | None]:
        names = {f.path for f in facts.files}
        if "config.json" not in names:
            raise MissingConfig(f"{facts.repo_id}@{facts.sha[:12]} has no config.json: not a model Wingsmith "
                                "can size or serve", repo_id=facts.repo_id, revision=facts.sha)
        config = self._download_json(facts, "config.json", token, invalid=InvalidConfig)
        index_total = None
        weight_sizes = [f.size for f in facts.files if f.path.endswith(".safetensors") and "/" not in f.path]
        if (not weight_sizes or None in weight_sizes) and "model.safetensors.index.json" in names:
            # Only when the file sizes cannot give the figure: the index is the next best source.
            index = self._download_json(facts, "model.safetensors.index.json", token)
            total = (index.get("metadata") or {}).get("total_size") if isinstance(index, dict) else None
            index_total = int(total) if isinstance(total, (int, float, str)) and str(total).isdigit() else None
        if not isinstance(config, dict):
            raise InvalidConfig(f"{facts.repo_id}@{facts.sha}: config.json is not a JSON object",
                                repo_id=facts.repo_id, revision=facts.sha)
        try:
            return check_config(config), index_total
        except ConfigRefused as exc:
            raise ConfigOutOfBounds(f"{facts.repo_id}@{facts.sha}: {exc.message}", field=exc.field,
                                    repo_id=facts.repo_id, revision=facts.sha) from None

    def _call(self, fn: Callable[[], T], repo_id: str, revision: str, token: str | None,
              filename: str | None = None) -> T:
        what = f"{repo_id}@{revision}" + (f" {filename}" if filename else "")
        failures, limited = 0, 0
        while True:
            try:
                return fn()
            except GatedRepoError:
                raise GatedRepo(
                    f"{repo_id} is gated and {hub_token.describe(self.token_ref)} does not have access: "
                    f"accept the model's terms at https://huggingface.co/{repo_id} with the account that owns "
                    "the token, then point WINGSMITH_HF_TOKEN_REF at that token (an env var name or file:<path>)",
                    repo_id=repo_id, revision=revision) from None
            except RevisionNotFoundError:
                raise RevisionNotFound(f"{repo_id} has no revision {revision!r} (branch, tag or commit)",
                                       repo_id=repo_id, revision=revision) from None
            except RepositoryNotFoundError:
                raise RepoNotFound(f"no model {repo_id} on the Hub, or it is private and "
                                   f"{hub_token.describe(self.token_ref)} cannot see it",
                                   repo_id=repo_id, revision=revision) from None
            except EntryNotFoundError as exc:
                if isinstance(exc, LocalEntryNotFoundError):
                    # hf_hub_download's way of saying the Hub could not be reached.
                    failures = self._backoff(failures, what, "the Hub could not be reached", repo_id, revision)
                    continue
                raise MissingConfig(f"{what} does not exist", repo_id=repo_id, revision=revision) from None
            except HfHubHTTPError as exc:
                status = exc.response.status_code if exc.response is not None else 0
                if status == 429:
                    wait = _advertised_wait(exc.response.headers)
                    limited += 1
                    if limited > self.retry.rate_limit_retries or (wait or 0) > self.retry.max_rate_limit_wait:
                        raise HubRateLimited(
                            f"the Hub rate-limited {what}" + (f"; retry after {wait:g}s" if wait else ""),
                            retry_after=wait, repo_id=repo_id, revision=revision) from None
                    wait = wait if wait is not None else self._delay(limited - 1)
                    log.warning("hub.rate_limited", repo=repo_id, wait_s=wait, attempt=limited)
                    self._sleep(wait)
                    continue
                if status >= 500:
                    failures = self._backoff(failures, what, f"the Hub answered {status}", repo_id, revision)
                    continue
                raise HubError(f"the Hub refused {what} with {status}", repo_id=repo_id, revision=revision) from None
            except _httpx.TimeoutException:
                failures = self._backoff(failures, what, f"the Hub did not answer within {self.timeout:g}s",
                                         repo_id, revision)
            except _httpx.TransportError as exc:
                failures = self._backoff(failures, what, f"cannot connect to the Hub ({type(exc).__name__})",
                                         repo_id, revision)

    def _delay(self, failures: int) -> float:
        return min(self.retry.max_backoff, self.retry.backoff * 2 ** failures)

    def _backoff(self, failures: int, what: str, cause: str, repo_id: str, revision: str) -> int:
        failures += 1
        if failures >= self.retry.attempts:
            raise HubUnavailable(f"{cause} for {what} ({failures} attempts); the Hub at {self.endpoint} "
                                 "is unavailable, try again later", repo_id=repo_id, revision=revision)
        wait = self._delay(failures - 1)
        log.warning("hub.retrying", repo=repo_id, cause=cause, attempt=failures, wait_s=wait)
        self._sleep(wait)
        return failures


def _advertised_wait(headers) -> float | None:
    info = parse_ratelimit_headers(headers)
    if info is not None and info.remaining == 0:
        return float(info.reset_in_seconds)
    value = headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def _first_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}"[:300]
    if isinstance(exc, RecursionError):
        return "nested too deep to read"
    return f"{type(exc).__name__}: {exc}"[:300]


def _redact(exc: HubError, token: str | None) -> None:
    """Belt and braces: messages are built without the token, but make sure of it."""
    if token and token in exc.message:
        exc.message = exc.message.replace(token, "***")
        exc.args = (exc.message,)

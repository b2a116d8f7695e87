"""How each local gateway replica learns its routes: it pulls the table the plane published.

The endpoint activity publishes every endpoint's routes in Postgres (wingsmith/adapters/store/gateway_routes.py)
and the API serves that table at `/v1/gateway/routes` with its version as the ETag. Each replica polls
it every few seconds with `If-None-Match`, so all replicas converge on the same table by themselves,
one that starts late catches up at its first poll, and the push to one admin URL stays a fast path.
While the API or Postgres is down the replica keeps serving the table it has (also saved on disk).

Pushes and pulls can cross: a poll answered before a push landed would undo it for one interval. So an
answer is applied only if the table did not change while it was on its way, and any change the
replica did not pull (a push) makes the next poll ask for the whole table, not for news since a version.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, ValidationError

from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.secrets import SecretUnavailable, read_secret_ref
from wingsmith.domain.gateway.routes import EndpointRoutes

SOURCE_ENV = "WINGSMITH_GATEWAY_ROUTES_SOURCE"
INTERVAL_ENV = "WINGSMITH_GATEWAY_ROUTES_POLL_INTERVAL"
DEFAULT_INTERVAL = 2.0
TABLE_PATH = "/v1/gateway/routes"

log = get_logger("wingsmith.adapters.gateway.routes_sync")


class Table(Protocol):
    """What the sync needs of a gateway's route table (gateway/table.py's RouteTable)."""

    def all(self) -> list[EndpointRoutes]: ...
    def get(self, model: str) -> EndpointRoutes | None: ...
    def set(self, routes: EndpointRoutes) -> Any: ...
    def delete(self, model: str) -> bool: ...


class PublishedTable(BaseModel):
    version: int
    routes: list[EndpointRoutes]


class RoutesSync:
    """`source` is the API's base URL; `token_ref` the gateway admin token's reference, read per poll
    (a rotated token is picked up without a restart)."""

    def __init__(self, table: Table, source: str, token_ref: str | None, *, interval: float = DEFAULT_INTERVAL,
                 timeout: float = 5.0, transport: httpx.AsyncBaseTransport | None = None,
                 on_change: Callable[[], Any] | None = None):
        self.table = table
        self.url = source.rstrip("/") + TABLE_PATH
        self.token_ref = token_ref
        self.interval = interval
        self.on_change = on_change  # e.g. let the gateway close connections to backends it no longer routes
        self.version: int | None = None  # of the table last applied
        self.last_pulled: float | None = None  # monotonic time of the last answer from the source
        self.unreachable_since: float | None = None
        self._etag: str | None = None
        self._applied: list[EndpointRoutes] | None = None
        self._http = httpx.AsyncClient(timeout=timeout, trust_env=False, transport=transport,
                                       verify=default_tls(trust_env=False))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def run(self) -> None:
        while True:
            await self.pull()
            await asyncio.sleep(self.interval)

    async def pull(self) -> bool:
        """One poll; True when the table changed."""
        held = self.table.all()
        if held != self._applied:
            self._etag = None  # changed by a push (or never pulled): ask for the whole table
        try:
            headers = {"Authorization": f"Bearer {read_secret_ref(self.token_ref)}"} if self.token_ref else {}
        except SecretUnavailable as exc:
            self._unreachable(f"the admin token cannot be read: {exc}")
            return False
        if self._etag:
            headers["If-None-Match"] = self._etag
        try:
            resp = await self._http.get(self.url, headers=headers)
        except httpx.HTTPError as exc:
            self._unreachable(type(exc).__name__)
            return False
        if resp.status_code == 304:
            self._reachable()
            return False
        if resp.status_code != 200:
            self._unreachable(f"HTTP {resp.status_code}: {_message(resp)}")
            return False
        try:
            pulled = PublishedTable.model_validate_json(resp.content)
        except ValidationError as exc:
            self._unreachable(f"an unreadable table ({exc.error_count()} problems)")
            return False
        self._reachable()
        if self.table.all() != held:
            return False  # a push landed while we asked: this answer may predate it; ask again next time
        changed = self._apply(pulled.routes)
        self._applied = self.table.all()
        self._etag = resp.headers.get("etag")
        if changed or pulled.version != self.version:
            log.info("gateway routes pulled", version=pulled.version, endpoints=len(pulled.routes), changed=changed)
        self.version = pulled.version
        if changed and self.on_change is not None:
            result = self.on_change()
            if asyncio.iscoroutine(result):
                await result
        return changed

    def _apply(self, routes: list[EndpointRoutes]) -> bool:
        wanted = {r.model_name: r for r in routes}
        changed = False
        for held in self.table.all():
            if held.model_name not in wanted:
                changed |= self.table.delete(held.model_name)
        for name, r in wanted.items():
            if self.table.get(name) != r:
                self.table.set(r)
                changed = True
        return changed

    def _unreachable(self, reason: str) -> None:
        if self.unreachable_since is None:
            self.unreachable_since = time.monotonic()
            log.warning("gateway route source unreachable; serving the last table", source=self.url,
                        reason=reason, version=self.version)

    def _reachable(self) -> None:
        self.last_pulled = time.monotonic()
        if self.unreachable_since is not None:
            log.info("gateway route source back", source=self.url,
                     after_seconds=round(self.last_pulled - self.unreachable_since, 1))
            self.unreachable_since = None


def _message(resp: httpx.Response) -> str:
    try:
        return str(resp.json()["error"]["message"])[:200]
    except (ValueError, KeyError, TypeError):
        return resp.reason_phrase


def attach(app: Any, sync: RoutesSync) -> None:
    """Run `sync` for as long as the ASGI app (Starlette) serves, inside the app's own lifespan; the
    app's readiness waits for its first answer (gateway/app.py)."""
    app.state.routes_sync = sync
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(scope_app: Any) -> AsyncIterator[Any]:
        async with inner(scope_app) as state:
            task = asyncio.create_task(sync.run())
            try:
                yield state
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await sync.aclose()

    app.router.lifespan_context = lifespan

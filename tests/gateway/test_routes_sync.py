"""Several gateway replicas, one route table: each pulls what the plane published (docs/production.md,
"Several gateways"). Real processes: the API (`python -m api`) over the test Postgres, gateways
(`python -m gateway --routes-source`), scripted backends; routes go in through the endpoint
activity itself, which publishes and then pushes to one replica."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.exceptions import ApplicationError

from activities.endpoint import EndpointActivities
from api.app import create_app
from api.auth import TokenTable
from contracts.endpoint import SetRoutesInput
from gateway.app import create_gateway_app
from gateway.table import RouteTable
from tests.gateway.conftest import MODEL, ScriptedBackend, Served
from wingsmith.adapters.gateway.routes_sync import RoutesSync, attach
from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.store.gateway_routes import publish, published
from wingsmith.domain.config import Settings
from wingsmith.domain.gateway.routes import Backend, EndpointRoutes
from wingsmith.local.ports import free_port
from wingsmith.local.temporal_server import stop_process, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
POLL = 0.5  # seconds between a replica's pulls in these tests
# A replica serves a change within a few polls; the rest is slack for a loaded machine (2 cores shared
# with other test runs: one answer of the API took 6 s there).
CONVERGE = 4 * POLL + 8.0
TOKENS = {"tok-admin": {"name": "ana", "roles": ["admin"]}}


def routes_to(*backends: ScriptedBackend) -> EndpointRoutes:
    return EndpointRoutes(model_name=MODEL, backends=[
        Backend(id=f"sim/{b.name}", cluster="sim", workload_id="w1", url=b.url, weight=1) for b in backends])


class Process:
    """A product process on its own port, logging to a file; stopped (or killed) by the test."""

    def __init__(self, cmd: list[str], env: dict[str, str], port: int, log: Path):
        self.cmd, self.env, self.port, self.log = cmd, env, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Process:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        wait_for_port("127.0.0.1", self.port, 60, self.proc, self.cmd[2])
        return self

    def stop(self) -> None:
        stop_process(self.proc, 10)


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for p in started:
        p.stop()


@pytest.fixture
def backends() -> Iterator[tuple[ScriptedBackend, ScriptedBackend]]:
    a, b = ScriptedBackend("a"), ScriptedBackend("b")
    yield a, b
    a.stop()
    b.stop()


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "WINGSMITH_LOG_FORMAT": "json", **extra}


def _gateway(tmp_path: Path, name: str, token_file: Path, source: str) -> Process:
    port = free_port()
    return Process([sys.executable, "-m", "gateway", "--port", str(port), "--state-dir", str(tmp_path / name),
                    "--admin-token-ref", f"file:{token_file}", "--routes-source", source,
                    "--routes-poll-interval", str(POLL)], _env(), port, tmp_path / f"{name}.log")


def _answered_by(gateway: Process) -> str | None:
    """The backend that answered a chat through this gateway, None when it could not route one."""
    try:
        r = httpx.post(f"{gateway.url}/v1/chat/completions", timeout=5, verify=default_tls(),
                       json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    except httpx.HTTPError:
        return None
    return r.headers.get("x-wingsmith-backend") if r.status_code == 200 else None


def _until_answered_by(gateway: Process, backend: str, within: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < within:
        if _answered_by(gateway) == backend:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"{gateway.url} did not route to {backend} within {within} s:\n{gateway.log.read_text()}")


async def test_every_replica_serves_the_published_table_and_keeps_it_while_the_source_is_down(
        tmp_path, pg_dsn, pg_pool, token_file, backends, processes):
    a, b = backends
    api_port = free_port()
    api = Process([sys.executable, "-m", "api"], _env(
        DATABASE_URL=pg_dsn, WINGSMITH_API_PORT=str(api_port), WINGSMITH_HOME=str(tmp_path / "home"),
        WINGSMITH_AUTH_TOKENS=json.dumps(TOKENS), WINGSMITH_GATEWAY_ADMIN_TOKEN_REF=f"file:{token_file}"),
        api_port, tmp_path / "api.log")
    processes.append(await asyncio.to_thread(api.start))
    first = _gateway(tmp_path, "first", token_file, api.url)
    processes.append(await asyncio.to_thread(first.start))

    # The endpoint activity publishes, then pushes to the one admin URL it knows: the first replica.
    activities = EndpointActivities(Settings(gateway_url=first.url, gateway_admin_token_ref=f"file:{token_file}"),
                                    pg_pool)
    await activities.set_routes(SetRoutesInput(routes=routes_to(a)))
    assert await asyncio.to_thread(_answered_by, first) == "sim/a"  # pushed: no wait for a poll

    # A replica started after the change catches up on its own.
    late = _gateway(tmp_path, "late", token_file, api.url)
    processes.append(await asyncio.to_thread(late.start))
    caught_up = await asyncio.to_thread(_until_answered_by, late, "sim/a", CONVERGE)
    print(f"\na replica started after the change served it {caught_up:.2f} s after it listened")

    # A change reaches the replica nobody pushes to within a few polls.
    await activities.set_routes(SetRoutesInput(routes=routes_to(b)))
    assert await asyncio.to_thread(_answered_by, first) == "sim/b"
    took = await asyncio.to_thread(_until_answered_by, late, "sim/b", CONVERGE)
    print(f"a replica that is not pushed to served the change after {took:.2f} s (poll every {POLL} s)")

    # The source goes away: both keep serving their table, and so does a replica restarted meanwhile.
    api.stop()
    late.stop()
    await asyncio.to_thread(late.start)
    for gateway in (first, late):
        answers = [await asyncio.to_thread(_answered_by, gateway) for _ in range(10)]
        assert answers == ["sim/b"] * 10, gateway.log.read_text()
    assert "route source unreachable" in late.log.read_text()

    # The source is back and the endpoint is removed: every replica drops it.
    await asyncio.to_thread(api.start)
    await activities.set_routes(SetRoutesInput(routes=EndpointRoutes(model_name=MODEL)))
    for gateway in (first, late):
        deadline = time.monotonic() + CONVERGE
        while (await asyncio.to_thread(httpx.get, f"{gateway.url}/v1/models")).json()["data"]:
            assert time.monotonic() < deadline, gateway.log.read_text()
            await asyncio.sleep(0.1)


@pytest_asyncio.fixture(loop_scope="session")
async def api(pg_pool, token_file, tmp_path):
    settings = Settings(home=tmp_path, auth_tokens=json.dumps(TOKENS), gateway_admin_token_ref=f"file:{token_file}")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


async def test_the_table_answers_only_the_gateway_token_and_its_version_moves_only_on_a_change(
        api, pg_pool, token_file, backends):
    a, b = backends
    url = "/v1/gateway/routes"
    missing = await api.get(url)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "unauthenticated"
    person = await api.get(url, headers={"Authorization": "Bearer tok-admin"})  # a person's token is not enough
    assert person.status_code == 401 and token_file.read_text().strip() not in person.text
    gateway = {"Authorization": f"Bearer {token_file.read_text().strip()}"}

    before = await published(pg_pool)
    version = await publish(pg_pool, routes_to(a))
    assert version > before.version
    assert await publish(pg_pool, routes_to(a)) == version  # a retried activity moves nothing
    r = await api.get(url, headers=gateway)
    assert r.status_code == 200 and r.headers["etag"] == f'"{version}"'
    assert EndpointRoutes.model_validate(r.json()["routes"][0]) == routes_to(a)
    unchanged = await api.get(url, headers={**gateway, "If-None-Match": r.headers["etag"]})
    assert unchanged.status_code == 304 and not unchanged.content

    moved = await publish(pg_pool, routes_to(a, b))
    assert moved > version
    assert (await api.get(url, headers={**gateway, "If-None-Match": r.headers["etag"]})).json()["version"] == moved
    gone = await publish(pg_pool, EndpointRoutes(model_name=MODEL))
    left = (await api.get(url, headers=gateway)).json()["routes"]
    assert gone > moved and MODEL not in [x["model_name"] for x in left]


async def test_a_pull_answered_before_a_push_landed_does_not_undo_the_push(backends, tmp_path):
    a, b = backends
    old_table = {"version": 1, "routes": [routes_to(a).model_dump(mode="json")]}
    new_table = {"version": 2, "routes": [routes_to(b).model_dump(mode="json")]}
    current = {"table": old_table, "delay": 0.5}

    async def table(request: Request) -> Response:
        await asyncio.sleep(current["delay"])
        return JSONResponse(current["table"], headers={"ETag": f'"{current["table"]["version"]}"'})

    source = Served(Starlette(routes=[Route("/v1/gateway/routes", table)]))
    routes = RouteTable(None)
    sync = RoutesSync(routes, source.url, None, interval=POLL)
    try:
        pulling = asyncio.create_task(sync.pull())
        await asyncio.sleep(0.1)  # the old table is on its way; the plane publishes b and pushes it
        current["table"], current["delay"] = new_table, 0.0
        routes.set(routes_to(b))
        assert await pulling is False
        assert routes.get(MODEL) == routes_to(b)  # the late answer was not applied
        assert await sync.pull() is False and sync.version == 2  # the next pull asks for the whole table
        assert routes.get(MODEL) == routes_to(b)
    finally:
        await sync.aclose()
        source.stop()


async def test_a_push_to_a_gateway_that_is_down_fails_only_where_no_replica_pulls(pg_pool, token_file, backends):
    a, _ = backends
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens: a replica restarting
    pushed_only = EndpointActivities(Settings(gateway_url=down, gateway_admin_token_ref=f"file:{token_file}"), pg_pool)
    with pytest.raises(ApplicationError) as refused:
        await pushed_only.set_routes(SetRoutesInput(routes=routes_to(a)))
    assert not refused.value.non_retryable  # the push is the only way there: try again

    await publish(pg_pool, EndpointRoutes(model_name=MODEL))
    pulled = EndpointActivities(Settings(gateway_url=down, gateway_admin_token_ref=f"file:{token_file}",
                                         gateway_routes_pulled=True), pg_pool)
    assert await pulled.set_routes(SetRoutesInput(routes=routes_to(a))) is None
    table = await published(pg_pool)
    assert [r for r in table.routes if r.model_name == MODEL] == [routes_to(a)]  # the replicas will pull it


async def test_a_replica_that_pulls_is_ready_once_its_routes_landed(backends, tmp_path, token_file):
    a, b = backends
    answer = {"table": None}

    async def table(request: Request) -> Response:
        if answer["table"] is None:
            return JSONResponse({"error": {"message": "Postgres is unreachable."}}, status_code=503)
        return JSONResponse(answer["table"], headers={"ETag": '"1"'})

    source = Served(Starlette(routes=[Route("/v1/gateway/routes", table)]))
    syncs: list[RoutesSync] = []

    def replica(name: str, *, pulls: bool = True) -> tuple[httpx.AsyncClient, RoutesSync | None]:
        app = create_gateway_app(state_dir=tmp_path / name, admin_token_ref=f"file:{token_file}")
        sync = None
        if pulls:
            sync = RoutesSync(app.state.table, source.url, None, interval=POLL)
            attach(app, sync)
            syncs.append(sync)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway"), sync

    async def ready(client: httpx.AsyncClient) -> bool:
        r = await client.get("/readyz")
        assert r.status_code in (200, 503), r.text
        if r.status_code == 503:
            assert r.json()["error"]["code"] == "routes_not_loaded"
        return r.status_code == 200

    try:
        fresh, sync = replica("fresh")
        assert sync is not None
        assert not await ready(fresh)  # it would answer 404 for every model
        await sync.pull()  # the source answers 503: still nothing to serve
        assert not await ready(fresh)
        answer["table"] = {"version": 1, "routes": [routes_to(a).model_dump(mode="json")]}
        assert await sync.pull() is True
        assert await ready(fresh)
        assert [m["id"] for m in (await fresh.get("/v1/models")).json()["data"]] == [MODEL]

        answer["table"] = None  # the source is down from here on
        pushed, _ = replica("pushed")
        assert not await ready(pushed)
        admin = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        r = await pushed.put(f"/admin/routes/{MODEL}", json=routes_to(b).model_dump(mode="json"), headers=admin)
        assert r.status_code == 200, r.text
        assert await ready(pushed)

        restarted, _ = replica("fresh")  # the same state dir: the table it served before its restart
        assert await ready(restarted)
        push_only, _ = replica("push-only", pulls=False)
        assert await ready(push_only)  # nothing to wait for: routes come only by push
    finally:
        for s in syncs:
            await s.aclose()
        source.stop()

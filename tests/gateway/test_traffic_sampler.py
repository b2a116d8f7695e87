"""The plane's traffic sampler against a real gateway and real Postgres: the gateway serves chat requests
to two scripted backends, the sampler stores its counters, and the intervals read back count every
request once, through a gateway restart (its counters begin again) and a gap while it is down. Only one
of two samplers on one database samples; the other takes over when the first stops and counts on from
the first one's last reading. Gateway replicas behind one name are each read on their own and added up.
The tables stay bounded by age."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from pydantic import ValidationError

from api.app import create_app
from api.auth import TokenTable
from gateway import create_gateway_app
from tests.gateway.conftest import MODEL, RunningGateway, Served
from tests.gateway.test_local_gateway import MESSAGES, routes
from tests.support import wait_until
from wingsmith.adapters.gateway import LocalGatewayClient
from wingsmith.adapters.gateway.traffic_sampler import (
    SAMPLER_LOCK,
    TrafficSampler,
    addresses_of,
    replica_url,
    sampler_for,
)
from wingsmith.adapters.store import traffic_samples
from wingsmith.domain.config import Settings
from wingsmith.domain.gateway.traffic import BackendCounters

PERIOD = 0.3


async def _chat(http: httpx.AsyncClient, gateway_url: str, n: int, *, stream: bool = False) -> None:
    for _ in range(n):
        r = await http.post(f"{gateway_url}/v1/chat/completions",
                            json={"model": MODEL, "messages": MESSAGES, "stream": stream})
        assert r.status_code == 200, r.text


@pytest.fixture(autouse=True)
async def _no_earlier_traffic(pg_pool):
    """The database is the session's and every test here routes one model name: each counts its own."""
    await pg_pool.execute("truncate traffic_slots, traffic_readings, traffic_gateway_reads")


async def _spans(pool, since: datetime, endpoint: str = MODEL):
    return await traffic_samples.traffic_by_backend(pool, start=since, end=datetime.now(UTC) + timedelta(seconds=5),
                                                    endpoint=endpoint)


async def _counted(pool, since: datetime, endpoint: str = MODEL) -> dict[str, int]:
    return {b: sum(i.counts.requests for i in spans) for b, spans in (await _spans(pool, since, endpoint)).items()}


async def test_samples_count_every_request_through_a_gateway_restart(pg_pool, tmp_path, token_file, backends):
    alpha, beta = backends
    state = tmp_path / "gateway-state"
    gateway = RunningGateway(state, token_file)
    restarted = None
    sampler = TrafficSampler(pg_pool, [gateway.url], admin_token_ref=gateway.token_ref, every_seconds=PERIOD,
                             keep_seconds=600)
    since = datetime.now(UTC) - timedelta(seconds=5)
    try:
        gateway.client.set_routes(routes((alpha, 1), (beta, 1)))
        sampler.start()

        async def read_once():
            return sampler.readings >= 1
        await wait_until(read_once, what="the sampler's first reading")
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            await _chat(http, gateway.url, 10)
            await _chat(http, gateway.url, 4, stream=True)
            expected = {f"sim-alpha/{MODEL}": 7, f"sim-beta/{MODEL}": 7}

            async def all_counted():
                return await _counted(pg_pool, since) == expected
            await wait_until(all_counted, timeout=10, what=f"{expected} in the stored intervals")

            # The gateway stops (a gap: its readings fail) and starts again with its counters at zero.
            port = gateway.served.port
            gateway.stop()
            before = sampler.readings

            async def missed_two():
                return sampler.readings >= before + 2
            await wait_until(missed_two, what="readings while the gateway is down")
            app = create_gateway_app(state_dir=state, admin_token_ref=gateway.token_ref, probe_interval=0.1,
                                     first_probe_after=0.1)
            restarted = Served(app, port=port)
            await _chat(http, restarted.url, 6)
            expected = {f"sim-alpha/{MODEL}": 10, f"sim-beta/{MODEL}": 10}
            await wait_until(all_counted, timeout=10, what=f"{expected} after the restart")

        spans = await _spans(pg_pool, since)
        # Every slot counts up from what came before it: no negative count from the reset, and the
        # picture after the restart continues the one before it (the slots span every reading).
        assert all(i.counts.requests >= 0 and i.requests_per_second >= 0 for s in spans.values() for i in s)
        alpha_spans = spans[f"sim-alpha/{MODEL}"]
        assert [i.end for i in alpha_spans] == sorted(i.end for i in alpha_spans)
        assert alpha_spans[-1].end - alpha_spans[0].start >= timedelta(seconds=PERIOD * 4)
        ttft = [i for i in spans[f"sim-alpha/{MODEL}"] if i.counts.first_byte]
        assert ttft, "the first byte of each answer is counted (time to first token)"
        # One increase per series and reading after the first: the gap left no row, the restart no negative.
        assert await pg_pool.fetchval("select min(requests) from traffic_slots where endpoint = $1", MODEL) >= 0
    finally:
        await sampler.stop()
        if restarted is not None:
            restarted.stop()
        else:
            gateway.stop()


async def test_one_sampler_leads_and_another_takes_over(pg_pool, tmp_path, token_file, backends):
    alpha, beta = backends
    gateway = RunningGateway(tmp_path / "gateway-state", token_file)
    first = TrafficSampler(pg_pool, [gateway.url], admin_token_ref=gateway.token_ref, every_seconds=PERIOD,
                           keep_seconds=600)
    second = TrafficSampler(pg_pool, [gateway.url], admin_token_ref=gateway.token_ref, every_seconds=PERIOD,
                            keep_seconds=600)
    since = datetime.now(UTC) - timedelta(seconds=5)
    try:
        gateway.client.set_routes(routes((alpha, 1), (beta, 1)))
        first.start()

        async def first_leads():
            return first.leading and first.readings > 0
        await wait_until(first_leads, what="the first sampler to lead")
        second.start()
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            await _chat(http, gateway.url, 6)
            await asyncio.sleep(PERIOD * 4)
            assert first.leading and not second.leading and second.readings == 0
            await first.stop()
            # Requests while nobody samples: the next leader's first reading counts them, differenced
            # against the last reading the first leader stored.
            await _chat(http, gateway.url, 4)

            async def second_leads():
                return second.leading and second.readings > 0
            await wait_until(second_leads, timeout=10, what="the second sampler to take over")
            expected = {f"sim-alpha/{MODEL}": 5, f"sim-beta/{MODEL}": 5}

            async def all_counted():
                return await _counted(pg_pool, since) == expected
            await wait_until(all_counted, timeout=10, what=f"{expected} across the handover")
    finally:
        await first.stop()
        await second.stop()
        gateway.stop()


class _Replica:
    """A gateway replica on its own loopback address (127.0.0.x) and the port every replica shares, as
    pods behind a headless Service."""

    def __init__(self, address: str, port: int, state: Path, token_ref: str) -> None:
        self.address = address
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        self.sock = sock
        self.app = create_gateway_app(state_dir=state, admin_token_ref=token_ref, probe_interval=0.1,
                                      first_probe_after=0.1)
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        self.url = f"http://{address}:{port}"

    async def started(self) -> None:
        async def up():
            return self.server.started
        await wait_until(up, what=f"the replica on {self.address}")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


async def test_replicas_behind_one_name_are_each_read_and_added_up(pg_pool, tmp_path, token_file, backends):
    alpha, beta = backends
    with socket.socket() as probe:  # a port free on loopback, shared by the replicas as pods share one
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token_ref = f"file:{token_file}"
    replicas = {a: _Replica(a, port, tmp_path / f"state-{a}", token_ref) for a in ("127.0.0.2", "127.0.0.3")}
    # What the headless Service's name resolves to: the ready pods, changing as pods come and go.
    ready = ["127.0.0.2", "127.0.0.3"]
    asked: list[tuple[str, int]] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return list(ready)

    name = f"http://gateway-replicas.test:{port}"
    sampler = TrafficSampler(pg_pool, [], admin_token_ref=token_ref, every_seconds=PERIOD, keep_seconds=600,
                             resolved=[name], resolve=resolve)
    since = datetime.now(UTC) - timedelta(seconds=5)
    try:
        for r in replicas.values():
            await r.started()
            LocalGatewayClient(r.url, token_ref).set_routes(routes((alpha, 1), (beta, 1)))
        sampler.start()

        async def read_twice():
            return sampler.readings >= 2
        await wait_until(read_twice, what="the sampler's first readings of both replicas")
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            await _chat(http, replicas["127.0.0.2"].url, 6)
            await _chat(http, replicas["127.0.0.3"].url, 10)
            expected = {f"sim-alpha/{MODEL}": 8, f"sim-beta/{MODEL}": 8}

            async def all_counted():
                return await _counted(pg_pool, since) == expected
            await wait_until(all_counted, timeout=10, what=f"{expected}: both replicas added up")
            # Each replica is its own series: one with fewer requests than the other is no counter reset.
            stored = {r["gateway"] for r in await pg_pool.fetch("select gateway from traffic_gateway_reads")}
            assert {f"http://127.0.0.2:{port}", f"http://127.0.0.3:{port}"} <= stored
            assert asked and asked[0] == ("gateway-replicas.test", port)

            # A pod replaced: one replica gone (its name no longer resolves to it), a new one with its
            # counters from zero. Its first reading only starts its count, as a new series' does.
            replicas.pop("127.0.0.3").stop()
            replicas["127.0.0.4"] = _Replica("127.0.0.4", port, tmp_path / "state-4", token_ref)
            await replicas["127.0.0.4"].started()
            LocalGatewayClient(replicas["127.0.0.4"].url, token_ref).set_routes(routes((alpha, 1), (beta, 1)))
            ready[:] = ["127.0.0.2", "127.0.0.4"]
            before = sampler.readings

            async def read_new():
                return sampler.readings >= before + 2
            await wait_until(read_new, what="readings of the new replica")
            await _chat(http, replicas["127.0.0.4"].url, 4)
            expected = {f"sim-alpha/{MODEL}": 10, f"sim-beta/{MODEL}": 10}
            await wait_until(all_counted, timeout=10, what=f"{expected} after a replica was replaced")
    finally:
        await sampler.stop()
        for r in replicas.values():
            r.stop()


async def test_a_name_resolves_through_the_system_resolver(pg_pool):
    assert "127.0.0.1" in await addresses_of("localhost", 8080)
    with pytest.raises(socket.gaierror):
        await addresses_of("no-such-gateway.invalid", 8080)
    # A name that does not resolve is a gap, not a failure of the sampling: nothing is read or stored.
    sampler = TrafficSampler(pg_pool, [], resolved=["http://no-such-gateway.invalid:8080"], every_seconds=PERIOD)
    async with pg_pool.acquire() as conn, httpx.AsyncClient(trust_env=False) as http:
        await sampler.sample(conn, http)
    assert sampler.readings == 1
    assert await pg_pool.fetchval("select count(*) from traffic_gateway_reads") == 0
    assert replica_url("http://wingsmith-gateway-replicas:8080/", "10.1.2.3") == "http://10.1.2.3:8080"
    assert replica_url("https://gw.example:9443/base", "fd00::7") == "https://[fd00::7]:9443/base"


async def test_the_store_keeps_a_bounded_window(pg_pool):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    keep = 60.0

    async def record(k: int, gateway: str = "g") -> None:
        await traffic_samples.record_samples(
            pg_pool, at=start + timedelta(seconds=10 * k), gateway=gateway,
            counters={("bounded", "east/wl"): BackendCounters(requests=k)}, keep_seconds=keep)
    for k in range(30):
        await record(k)
    slots = await pg_pool.fetch("select * from traffic_slots where endpoint = 'bounded' order by slot_at")
    # Two readings a slot (every 10 s, slots of 20 s), each one request more than the last; the window
    # (60 s back from the last reading at 290 s) keeps the slots that end in it.
    assert [(r["slot_at"] - start).total_seconds() for r in slots] == [220, 240, 260, 280]
    assert [r["requests"] for r in slots] == [2, 2, 2, 2]
    assert (slots[0]["start_at"] - start).total_seconds() == 210
    assert (slots[-1]["end_at"] - start).total_seconds() == 290
    assert slots[0]["workload_id"] == "wl"
    # A repeated write of one reading (a retry), or a late one, adds nothing.
    await record(29)
    await record(27)
    assert await pg_pool.fetchval("select sum(requests) from traffic_slots where endpoint = 'bounded'") == 8
    # A replica gone for longer than the window leaves nothing behind; one that comes back after that
    # starts its count again instead of taking the whole absence as one interval.
    await record(40, gateway="other")
    assert await pg_pool.fetchval("select count(*) from traffic_gateway_reads where gateway = 'g'") == 0
    assert await pg_pool.fetchval("select count(*) from traffic_readings where gateway = 'g'") == 0
    await record(50)
    assert await pg_pool.fetchval("select count(*) from traffic_slots where end_at > $1",
                                  start + timedelta(seconds=290)) == 0


async def test_the_api_process_samples_from_its_lifespan(pg_pool, tmp_path, token_file):
    gateway = RunningGateway(tmp_path / "gateway-state", token_file)
    settings = Settings(home=tmp_path / "home", auth_tokens=json.dumps({"t": {"name": "a", "roles": ["admin"]}}),
                        gateway_url=gateway.url, gateway_admin_token_ref=gateway.token_ref,
                        traffic_sample_seconds=PERIOD)
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool)
    try:
        async with app.router.lifespan_context(app):
            sampler = app.state.traffic_sampler
            assert sampler is not None and sampler.gateways == [gateway.url]

            async def sampling():
                return sampler.leading and sampler.readings > 0
            await wait_until(sampling, what="the API's sampler to read the gateway")
        assert not sampler.leading  # stopped with the process, the lock given back
        async with pg_pool.acquire() as conn:
            assert await conn.fetchval("select pg_try_advisory_lock($1)", SAMPLER_LOCK)
            await conn.execute("select pg_advisory_unlock($1)", SAMPLER_LOCK)
    finally:
        gateway.stop()
    # Off when there is nothing to read or no database.
    assert sampler_for(pg_pool, settings.model_copy(update={"traffic_sample_seconds": 0})) is None
    assert sampler_for(None, settings) is None
    envoy = Settings(gateway="envoy")
    assert envoy.traffic_gateways == [] and sampler_for(pg_pool, envoy) is None
    assert Settings(traffic_gateway_urls="http://a:1, http://b:2/").traffic_gateways == ["http://a:1", "http://b:2/"]
    # Names to resolve to every replica: the sampler reads them (and no fixed gateway_url beside them).
    replicas = Settings(traffic_gateway_dns="http://wingsmith-gateway-replicas:8080")
    assert replicas.traffic_gateways == []
    sampler = sampler_for(pg_pool, replicas)
    assert sampler is not None and sampler.resolved == ["http://wingsmith-gateway-replicas:8080"]
    with pytest.raises(ValidationError, match="WINGSMITH_TRAFFIC_GATEWAY_DNS: 'wingsmith-gateway-replicas:8080'"):
        Settings(traffic_gateway_dns="wingsmith-gateway-replicas:8080")

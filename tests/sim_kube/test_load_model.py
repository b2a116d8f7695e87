"""The simulated engines' load model: the pure model's laws (Hypothesis), then a deployment under load
over real HTTP, whose time to first token rises past its slots and comes back down with twice the
replicas, and the ways a profile is set (annotation, admin route) or refused."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from prometheus_client.parser import text_string_to_metric_families

from sim.kube.graph import max_num_seqs
from sim.kube.load_model import (
    DEFAULT_PROFILE,
    MAX_INPUT_TOKENS,
    MAX_PROFILE_CHARS,
    PROFILE_ANNOTATION,
    Arrival,
    LoadProfile,
    LoadSettings,
    Scheduler,
    input_tokens,
    parse_profile,
    percentile,
    prefill_ms,
    simulate,
    step_ms,
)
from sim.kube.serving import Engine, EngineConfig, EngineGone
from tests.sim_kube.kit import apply, dgd, get, ready_for, wait_for

unit = pytest.mark.unit
integration = pytest.mark.integration

profiles = st.builds(
    lambda ttft, tpot, more, seqs: LoadProfile(ttft_ms_at_1k_isl=ttft, tpot_ms_at_batch_1=tpot,
                                               tpot_ms_at_max_batch=tpot + more, max_num_seqs=seqs),
    st.floats(0, 500), st.floats(0, 50), st.floats(0, 100), st.integers(1, 8))
prompt_lengths = st.integers(1, 4000)
answer_lengths = st.integers(1, 40)


def _ttfts(profile: LoadProfile, n: int, isl: int, osl: int, replicas: int = 1) -> list[float]:
    """Each request's time to first token when `n` like requests arrive at once."""
    return [o.ttft_ms for o in simulate(profile, [Arrival(0.0, isl, osl)] * n, replicas)]


# ---- the pure model ------------------------------------------------------------------------------

@unit
@given(profiles, prompt_lengths, prompt_lengths, st.integers(1, 16), st.integers(1, 16))
def test_prefill_and_decode_steps_grow_with_the_prompt_and_the_batch(profile, isl_a, isl_b, batch_a, batch_b):
    slots = profile.max_num_seqs or 8
    (isl_lo, isl_hi), (lo, hi) = sorted((isl_a, isl_b)), sorted((batch_a, batch_b))
    assert step_ms(profile, lo, slots) <= step_ms(profile, hi, slots)
    assert prefill_ms(profile, isl_lo, lo, slots) <= prefill_ms(profile, isl_hi, lo, slots)
    assert prefill_ms(profile, isl_lo, lo, slots) <= prefill_ms(profile, isl_lo, hi, slots)
    assert step_ms(profile, 1, slots) == profile.tpot_ms_at_batch_1
    if slots > 1:  # a single slot's only batch is batch 1, and its figure is the one at batch 1
        assert step_ms(profile, slots, slots) == pytest.approx(profile.tpot_ms_full)


@unit
@settings(max_examples=200)
@given(profiles, st.integers(1, 40), st.integers(1, 20), prompt_lengths, answer_lengths, st.integers(1, 4))
def test_more_requests_at_once_never_lower_any_requests_ttft(profile, n, more, isl, osl, replicas):
    alone, crowded = _ttfts(profile, n, isl, osl, replicas), _ttfts(profile, n + more, isl, osl, replicas)
    assert all(c >= a - 1e-9 for a, c in zip(alone, crowded, strict=False))
    assert max(crowded) >= max(alone)


@unit
@settings(max_examples=200)
@given(profiles, st.integers(1, 40), prompt_lengths, st.integers(1, 4000), answer_lengths)
def test_longer_prompts_never_lower_any_requests_ttft(profile, n, isl, longer, osl):
    short, long = _ttfts(profile, n, isl, osl), _ttfts(profile, n, isl + longer, osl)
    assert all(b >= a - 1e-9 for a, b in zip(short, long, strict=True))


@unit
@settings(max_examples=200)
@given(profiles, st.integers(1, 60), prompt_lengths, answer_lengths, st.integers(1, 4))
def test_one_more_replica_never_raises_any_requests_ttft(profile, n, isl, osl, replicas):
    fewer, more = _ttfts(profile, n, isl, osl, replicas), _ttfts(profile, n, isl, osl, replicas + 1)
    assert all(m <= f + 1e-9 for f, m in zip(fewer, more, strict=True))


@unit
def test_a_saturated_replica_queues_and_a_second_one_halves_the_tail():
    """The figures behind the HTTP test below, on the virtual clock."""
    profile = LoadProfile(ttft_ms_at_1k_isl=40, tpot_ms_at_batch_1=4, tpot_ms_at_max_batch=8, max_num_seqs=4)
    light, heavy = _ttfts(profile, 2, 1000, 16), _ttfts(profile, 16, 1000, 16)
    doubled = _ttfts(profile, 16, 1000, 16, replicas=2)
    # The second of two shares its replica with the first: its prefill slows as a decode step of two does.
    assert percentile(light, 95) == pytest.approx(40 * step_ms(profile, 2, 4) / step_ms(profile, 1, 4))
    assert percentile(heavy, 95) > 5 * percentile(light, 95)  # three waves waited for a slot
    assert percentile(doubled, 95) < 0.6 * percentile(heavy, 95)
    assert _ttfts(DEFAULT_PROFILE, 500, 100_000, 1000) == [0.0] * 500  # the default: no latency at all


arrivals = st.lists(st.builds(Arrival, st.floats(0, 1000), prompt_lengths, answer_lengths), min_size=1, max_size=30)


@unit
@given(profiles, arrivals, st.integers(1, 4))
def test_waiting_requests_get_their_slots_in_the_order_they_came(profile, requests, replicas):
    outcomes = simulate(profile, requests, replicas)
    order = sorted(range(len(requests)), key=lambda i: (requests[i].at_ms, i))
    admitted = [outcomes[i].admitted_ms for i in order]
    assert admitted == sorted(admitted)
    assert all(o.ttft_ms >= o.wait_ms >= 0 for o in outcomes)
    assert all(o.finished_ms >= o.first_token_ms for o in outcomes)


class SchedulerMachine(RuleBasedStateMachine):
    """Arrivals, departures and resizes in any order: the line is FIFO, never waits beside a free slot,
    and the batches always add up."""

    def __init__(self) -> None:
        super().__init__()
        self.scheduler = Scheduler(replicas=1, slots=2)
        self.ids = itertools.count()
        self.present: list[int] = []
        self.line: list[int] = []  # the order requests joined the line
        self.served_from_line: list[int] = []

    def _took(self, admissions) -> None:
        for a in admissions:
            assert a.replica < self.scheduler.replicas and a.batch <= self.scheduler.slots
            self.served_from_line.append(a.request)

    @rule()
    def arrive(self) -> None:
        ident = next(self.ids)
        self.present.append(ident)
        admission = self.scheduler.arrive(ident)
        if admission is None:
            self.line.append(ident)
        else:
            assert not self.scheduler.queued and admission.batch <= self.scheduler.slots

    @precondition(lambda self: self.present)
    @rule(data=st.data())
    def leave(self, data) -> None:
        ident = data.draw(st.sampled_from(self.present))
        self.present.remove(ident)
        if ident in self.line and ident not in self.served_from_line:
            self.line.remove(ident)  # gave up waiting
        self._took(self.scheduler.leave(ident))

    @rule(replicas=st.integers(0, 4), slots=st.integers(1, 4))
    def resize(self, replicas, slots) -> None:
        self._took(self.scheduler.resize(replicas, slots))

    @invariant()
    def adds_up(self) -> None:
        s = self.scheduler
        assert s.running + s.queued == len(self.present)
        assert sum(s.batches()) == s.running
        if s.queued:
            assert all(s.batch(r) >= s.slots for r in range(s.replicas))
        assert self.served_from_line == [i for i in self.line if i in self.served_from_line]
        assert s.waiting() == [i for i in self.line if i not in self.served_from_line and i in self.present]


TestScheduler = pytest.mark.unit(SchedulerMachine.TestCase)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                         max_size=3), max_leaves=8)
profile_keys = st.sampled_from(["ttft_ms_at_1k_isl", "tpot_ms_at_batch_1", "tpot_ms_at_max_batch", "max_num_seqs"])


@unit
@given(st.one_of(st.text(max_size=2000),
                 st.dictionaries(profile_keys | st.text(max_size=8), json_values, max_size=5).map(json.dumps)))
def test_any_annotation_gives_a_bounded_profile_or_a_reason(text):
    profile, error = parse_profile(text)
    assert (profile is None) != (error is None)
    if profile is not None:
        assert 0 <= profile.ttft_ms_at_1k_isl <= 60_000 and 0 <= profile.tpot_ms_at_batch_1 <= profile.tpot_ms_full
        assert profile.max_num_seqs is None or 1 <= profile.max_num_seqs <= 4096
    else:
        assert error and len(error) <= 500


@unit
def test_profiles_are_checked_and_bounded():
    good = '{"ttft_ms_at_1k_isl": 120, "tpot_ms_at_batch_1": 8, "tpot_ms_at_max_batch": 20, "max_num_seqs": 64}'
    assert parse_profile(good) == (LoadProfile(ttft_ms_at_1k_isl=120, tpot_ms_at_batch_1=8, tpot_ms_at_max_batch=20,
                                               max_num_seqs=64), None)
    for bad, why in (('{"ttft_ms_at_1k_isl": -1}', "ttft_ms_at_1k_isl"), ('{"max_num_seqs": 0}', "max_num_seqs"),
                     ('{"max_num_seqs": true}', "max_num_seqs"), ('{"ttft_ms_at_1k_isl": "20"}', "ttft_ms_at_1k_isl"),
                     ('{"tpot_ms_at_batch_1": 9, "tpot_ms_at_max_batch": 3}', "fuller batch"),
                     ('{"ttft": 1}', "ttft"), ("[1, 2]", "not a JSON object"), ("{", "not JSON"),
                     ('{"max_num_seqs": 5000}', "max_num_seqs"), ('{"ttft_ms_at_1k_isl": 1e400}', "finite"),
                     (" " * (MAX_PROFILE_CHARS + 1), "longer than")):
        profile, error = parse_profile(bad)
        assert profile is None and error is not None and why in error, (bad, error)
    assert input_tokens(0) == 1 and input_tokens(4000) == 1000 and input_tokens(10**9) == MAX_INPUT_TOKENS
    with pytest.raises(ValueError):
        LoadSettings(deployments={"Not A Key": LoadProfile()})


@unit
def test_slots_come_from_the_engine_command_line():
    def with_args(extra: str) -> dict[str, Any]:
        body = dgd("slots")
        worker = body["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]
        worker["args"][0] += extra
        worker["env"].append({"name": "SEQS", "value": "48"})
        return body

    assert max_num_seqs(with_args(" --max-num-seqs 32"), 4096) == 32
    assert max_num_seqs(with_args(" --max-num-seqs=${SEQS}"), 4096) == 48
    assert max_num_seqs(with_args(""), 4096) is None
    assert max_num_seqs(with_args(" --max-num-seqs 0"), 4096) is None
    assert max_num_seqs(with_args(" --max-num-seqs many"), 4096) is None
    assert max_num_seqs(with_args(" --max-num-seqs 9000"), 4096) is None


@unit
def test_the_engine_lets_the_line_in_as_slots_free_or_replicas_join_and_fails_it_when_it_stops():
    """The model on the real clock: a client that gives up leaves the line, a new replica takes the
    line at once, and a deployment that stops fails whoever still waits instead of hanging them."""
    profile = LoadProfile(ttft_ms_at_1k_isl=20, tpot_ms_at_batch_1=2, max_num_seqs=1)
    engine = Engine(EngineConfig(profile, "admin", replicas=1, slots=1))

    async def scenario() -> None:
        async def serve(run) -> float:
            try:
                await run.first_token()
                await run.token(run.output_tokens - 1)
                return time.monotonic()
            finally:
                run.close()

        first = asyncio.create_task(serve(engine.request(1000, 50)))  # holds the one slot ~120 ms
        gives_up = asyncio.create_task(serve(engine.request(1000, 5)))
        joined = asyncio.create_task(serve(engine.request(1000, 5)))
        await asyncio.sleep(0.01)
        assert engine.report(60)["queued"] == 2
        gives_up.cancel()
        await asyncio.gather(gives_up, return_exceptions=True)
        assert engine.report(60)["queued"] == 1 and engine.counts["abandoned"] == 1
        engine.configure(EngineConfig(profile, "admin", replicas=2, slots=1))  # a second replica is ready
        done_joined = await joined
        assert not first.done() and engine.report(60)["running_per_replica"] == [1, 0]
        waits = asyncio.create_task(serve(engine.request(10, 5)))
        stays = asyncio.create_task(serve(engine.request(10, 5)))
        also = asyncio.create_task(serve(engine.request(10, 5)))
        await asyncio.sleep(0.005)
        assert engine.report(60)["queued"] >= 1
        engine.stop()
        results = await asyncio.gather(waits, stays, also, return_exceptions=True)
        assert any(isinstance(r, EngineGone) for r in results)
        assert await first > done_joined
        with pytest.raises(EngineGone):
            engine.request(10, 5)

    asyncio.run(scenario())
    report = engine.report(60)
    assert report["running"] == 0 and report["queued"] == 0 and report["requests_total"] >= 2
    assert report["ttft_ms"]["count"] == report["requests_total"] and report["ttft_ms"]["max"] >= 20


# ---- over HTTP -----------------------------------------------------------------------------------

PROFILE = {"ttft_ms_at_1k_isl": 40, "tpot_ms_at_batch_1": 4, "tpot_ms_at_max_batch": 8, "max_num_seqs": 4}
PROMPT = "word " * 800  # 4,000 characters: about 1,000 tokens


def _deployment(name: str, replicas: int, profile: str | None, extra_args: str = "") -> dict[str, Any]:
    body = dgd(name, replicas=replicas)
    if profile is not None:
        body["metadata"]["annotations"] = {PROFILE_ANNOTATION: profile}
    body["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["args"][0] += extra_args
    return body


async def _ttfts_over_http(url: str, n: int, max_tokens: int = 16) -> list[float]:
    """Each of `n` streamed chat requests sent at once: seconds from sending to the first token."""
    body = {"model": "acme/Tiny-1B", "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "max_tokens": max_tokens}

    async def one(client: httpx.AsyncClient) -> float:
        start = time.perf_counter()
        first = None
        async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if first is None and line.startswith("data: {"):
                    first = time.perf_counter() - start
        assert first is not None
        return first

    limits = httpx.Limits(max_connections=n + 4, max_keepalive_connections=n + 4)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        return await asyncio.gather(*(one(client) for _ in range(n)))


def _load(url: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/sim/load")
    assert response.status_code == 200, response.text
    return response.json()


@integration
@pytest.mark.solo  # client-measured latencies against each other: beside other workers the client's own wait rules
def test_ttft_rises_past_the_slots_and_twice_the_replicas_bring_it_back_down(sim, custom, namespace):
    apply(custom, namespace, _deployment("loaded", 1, json.dumps(PROFILE)))
    wait_for(lambda: ready_for(get(custom, namespace, "loaded"), 1), what="one replica ready")
    url = sim.cluster("sim-east").frontend_url(namespace, "loaded")
    before = _load(url)
    assert (before["profile_source"], before["replicas"], before["slots_per_replica"]) == ("annotation", 1, 4)

    light = asyncio.run(_ttfts_over_http(url, 2))
    queued_before = _load(url)["requests_queued_total"]
    heavy = asyncio.run(_ttfts_over_http(url, 16))  # four times the slots of the one replica
    queued_heavy = _load(url)["requests_queued_total"] - queued_before

    apply(custom, namespace, _deployment("loaded", 2, json.dumps(PROFILE)))
    wait_for(lambda: _load(url)["replicas"] == 2, what="the frontend spreading over two ready replicas")
    queued_before = _load(url)["requests_queued_total"]
    doubled = asyncio.run(_ttfts_over_http(url, 16))
    queued_doubled = _load(url)["requests_queued_total"] - queued_before

    p95 = {name: percentile(values, 95) for name, values in
           (("light", light), ("heavy", heavy), ("doubled", doubled))}
    assert p95["light"] >= 0.04, p95  # the prefill of 1,000 tokens, at least
    assert p95["heavy"] > 3 * p95["light"], p95
    assert p95["doubled"] < 0.7 * p95["heavy"], p95
    assert queued_heavy >= 8 and queued_doubled < queued_heavy, (queued_heavy, queued_doubled)
    after = _load(url)
    assert after["running"] == 0 and after["queued"] == 0 and after["running_per_replica"] == [0, 0]
    assert after["requests_total"] == 34 and after["output_tokens_total"] == 34 * 16
    # The engine's own view, from arrival to first token, follows the model on the virtual clock (the
    # client's adds the HTTP round trips of sixteen streams on a busy box).
    modelled = max(_ttfts(LoadProfile.model_validate(PROFILE), 16, 1000, 16))
    assert after["ttft_ms"]["count"] == 34 and after["ttft_ms"]["max"] >= 0.8 * modelled, (after, modelled)
    assert 4 <= after["tpot_ms"]["p50"] <= 30, after["tpot_ms"]


@integration
def test_a_bad_profile_falls_back_to_the_default_and_the_admin_route_sets_one(sim, custom, namespace, caplog):
    caplog.set_level(logging.WARNING, logger="sim.kube.frontend")
    apply(custom, namespace, _deployment("badprofile", 1, '{"ttft_ms_at_1k_isl": -5}', " --max-num-seqs 8"))
    wait_for(lambda: ready_for(get(custom, namespace, "badprofile"), 1), what="ready")
    url = sim.cluster("sim-east").frontend_url(namespace, "badprofile")
    report = _load(url)
    assert report["profile_source"] == "default" and report["profile"] == DEFAULT_PROFILE.model_dump()
    assert "ttft_ms_at_1k_isl" in report["profile_error"] and report["slots_per_replica"] == 8
    warned = [r.getMessage() for r in caplog.records if "badprofile" in r.getMessage()]
    assert len(warned) == 1 and PROFILE_ANNOTATION in warned[0] and "ttft_ms_at_1k_isl" in warned[0], warned

    body = {"model": "acme/Tiny-1B", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    start = time.perf_counter()
    reply = httpx.post(f"{url}/v1/chat/completions", json=body)
    assert reply.status_code == 200 and time.perf_counter() - start < 1.0  # the default is instantaneous
    assert reply.json()["usage"] == {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}
    bad = httpx.post(f"{url}/v1/chat/completions", json={**body, "max_tokens": 0})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_max_tokens"
    assert httpx.get(f"{url}/sim/load", params={"window": "0"}).status_code == 400

    cluster = sim.cluster("sim-east")
    admin = f"{sim.base_url}/admin/clusters/sim-east/load"
    auth = {"Authorization": f"Bearer {cluster.token}"}
    key = f"{namespace}/badprofile"
    try:
        set_one = httpx.patch(admin, headers=auth, json={"deployments": {key: {"ttft_ms_at_1k_isl": 30}}})
        assert set_one.status_code == 200 and set_one.json()["deployments"][key]["ttft_ms_at_1k_isl"] == 30
        report = _load(url)
        assert report["profile_source"] == "admin" and report["profile"]["ttft_ms_at_1k_isl"] == 30
        refused = httpx.patch(admin, headers=auth, json={"deployments": {key: {"max_num_seqs": 0}}})
        assert refused.status_code == 422 and sim.load("sim-east").profile_for(namespace, "badprofile") is not None
        assert httpx.patch(admin, json={"default": {}}).status_code == 401
        reply = httpx.post(f"{url}/v1/chat/completions", json={**body, "messages": [
            {"role": "user", "content": "x" * 4000}]})  # 1,000 tokens: 30 ms of prefill
        assert reply.status_code == 200
        metrics = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{url}/metrics").text)}
        ttft = {s.labels.get("le"): s.value for s in metrics["dynamo_frontend_time_to_first_token_seconds"].samples
                if s.name.endswith("_bucket")}
        assert ttft["0.025"] == 1 and ttft["+Inf"] == 2, ttft  # the instantaneous one, then the 30 ms one
        requests = metrics["dynamo_frontend_requests"].samples
        assert any(s.labels == {"model": "acme/Tiny-1B", "status": "success"} and s.value == 2 for s in requests)
        assert metrics["dynamo_frontend_queued_requests"].samples[0].value == 0
        assert httpx.delete(admin, headers=auth).json() == {"default": None, "deployments": {}}
        assert _load(url)["profile_source"] == "default"
    finally:
        sim.load("sim-east").deployments = {}

"""The autoscaler's reads and writes on the real Postgres: the gateway's sampled counters of a workload's backends
become one sample per slot (slots the sampler read with no request are samples of no traffic), which the decision
takes; a decision recorded twice (a retried activity) is one row; a policy is set, read and removed; a claim past
only the team's budget goes through when approved, never past its GPUs."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from wingsmith.adapters import quota_claims
from wingsmith.adapters.store import autoscaling as store
from wingsmith.adapters.store import quotas as quota_store
from wingsmith.adapters.store.traffic_samples import SLOT_SECONDS, record_samples, slot_of
from wingsmith.domain.autoscaling import AutoscalingPolicy, Sample, decide
from wingsmith.domain.gateway.traffic import BackendCounters
from wingsmith.domain.quotas import BUDGET, Line, Quota, Verdict

POLICY = AutoscalingPolicy(max_replicas=4, ttft_p95_ms=1000, scale_up_window_s=40, scale_down_window_s=60)


def counters(requests: int, slow: int) -> BackendCounters:
    """`requests` so far, `slow` of them past 2 s to the first byte."""
    return BackendCounters(requests=requests, duration={1.0: requests - slow, 5.0: requests, float("inf"): requests},
                           first_byte={0.5: requests - slow, 2.5: requests, float("inf"): requests})


async def test_samples_per_slot_feed_the_decision(pg_pool):
    workload = f"wl-{uuid.uuid4().hex[:6]}"
    backend, gateway = f"sim-a/{workload}", f"gw-{uuid.uuid4().hex[:6]}"
    now = slot_of(await pg_pool.fetchval("select now()")) + timedelta(seconds=SLOT_SECONDS * 10)
    start = now - timedelta(seconds=SLOT_SECONDS * 6)
    for i in range(7):  # every slot: 100 requests, all of them slow
        await record_samples(pg_pool, at=start + timedelta(seconds=SLOT_SECONDS * i) + timedelta(seconds=1),
                             gateway=gateway, counters={("ep", backend): counters(100 * i, 100 * i)},
                             keep_seconds=3600)
    samples = await store.samples_of(pg_pool, workload, now=now, seconds=60)
    assert len(samples) >= 3 and all(s.requests_per_second > 0 for s in samples)
    assert all(s.ttft_p95_ms is not None and s.ttft_p95_ms > 1000 for s in samples)
    assert backend in samples[-1].backends
    d = decide(samples, now=now, replicas=1, policy=POLICY)
    assert (d.action, d.replicas_to) == ("scale_out", 2), d.words()

    source = f"autoscaler/{workload}"
    for _ in range(2):
        await store.record_decision(pg_pool, workload_id=workload, source=source, step="1", decision=d,
                                    outcome="scaled", note="asked the workload for 2 replica(s)")
    rows = await store.decisions_of(pg_pool, workload)
    assert len(rows) == 1 and rows[0]["outcome"] == "scaled" and rows[0]["inputs"]["replicas"] == 1


async def _readings(pg_pool, per_slot: int, into_the_last: int, last_count: int) -> tuple[str, str, list[Sample]]:
    """A workload's backend read one second into each of six slots, `per_slot` requests apart, then
    `into_the_last` seconds into the seventh, `last_count` more; its samples as of that last reading."""
    workload = f"wl-{uuid.uuid4().hex[:6]}"
    backend, gateway = f"sim-a/{workload}", f"gw-{uuid.uuid4().hex[:6]}"
    base = slot_of(await pg_pool.fetchval("select now()")) + timedelta(seconds=SLOT_SECONDS * 10)
    at = [base + timedelta(seconds=SLOT_SECONDS * i + 1) for i in range(6)]
    at.append(base + timedelta(seconds=SLOT_SECONDS * 6 + into_the_last))
    for i, when in enumerate(at):
        total = per_slot * min(i, 5) + (last_count if i == 6 else 0)
        await record_samples(pg_pool, at=when, gateway=gateway, counters={("ep", backend): counters(total, 0)},
                             keep_seconds=3600)
    return workload, backend, await store.samples_of(pg_pool, workload, now=at[-1], seconds=60)


async def test_a_slot_counted_for_a_few_seconds_only_is_taken_with_the_one_before(pg_pool):
    """The newest slot has counted 3 s: on its own, the 60 requests the gateway counted since its last sample
    (22 s of them) would read as 20 a second."""
    _, _, samples = await _readings(pg_pool, per_slot=100, into_the_last=3, last_count=60)
    newest = samples[-1]
    assert (newest.end - newest.start).total_seconds() >= SLOT_SECONDS
    assert newest.requests_per_second < 10, samples


async def test_a_rate_is_over_the_readings_its_counts_span(pg_pool):
    """12 s into a slot, its counts run from the reading 31 s ago: 310 requests are 10 a second, not 25.8."""
    _, backend, samples = await _readings(pg_pool, per_slot=200, into_the_last=12, last_count=310)
    assert samples[-1].requests_per_second == pytest.approx(10.0)
    assert samples[-1].backends[backend]["requests_per_second"] == pytest.approx(10.0)
    assert samples[-2].requests_per_second == pytest.approx(10.0)  # 200 over the 20 s between two readings


async def test_policy_set_read_removed(pg_pool):
    workload = f"wl-{uuid.uuid4().hex[:6]}"
    assert await store.policy_of(pg_pool, workload) is None
    await store.set_policy(pg_pool, workload, POLICY, "rita")
    assert await store.policy_of(pg_pool, workload) == (POLICY, "rita")
    assert await store.remove_policy(pg_pool, workload) and not await store.remove_policy(pg_pool, workload)


async def test_an_approval_never_goes_past_the_gpus(pg_pool):
    team = f"t-{uuid.uuid4().hex[:6]}"
    await quota_store.put_quota(pg_pool, team, Quota(gpus={"h200": 16}), "test")
    with pytest.raises(quota_claims.QuotaRefused) as refused:
        await quota_claims.claim(team, "wl-a", "h200", 8, 3, db=pg_pool, past_budget=True)  # 24 > 16 GPUs
    assert not refused.value.only_budget and "h200: 0 used + 24 asked > 16 GPUs" in str(refused.value)
    assert (await quota_claims.claim(team, "wl-a", "h200", 8, 2, db=pg_pool)).held


def test_only_the_budget_past_may_be_approved():
    def verdict(*past: str) -> Verdict:
        lines = [Line(limit=limit, unit="per hour" if limit == BUDGET else "GPUs", used=1, asked=1, quota=1,
                      fits=limit not in past) for limit in ("h200", BUDGET)]
        return Verdict(team="t", fits=not past, policy="refuse", lines=lines, words="past")
    assert quota_claims.QuotaRefused(verdict(BUDGET)).only_budget
    assert not quota_claims.QuotaRefused(verdict("h200", BUDGET)).only_budget

"""Autoscaling rows (migration 0012): each workload's policy (written by the API) and its autoscaler's decisions
(written by the autoscaler's activity, keyed by workflow id and tick), and the measurements the autoscaler
decides on: the gateway's sampled counters of the workload's backends, one sample per slot."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg

from wingsmith.adapters.gateway.traffic_history import Interval, whole
from wingsmith.adapters.store import traffic_samples
from wingsmith.domain.autoscaling import AutoscalingPolicy, Decision, Sample
from wingsmith.domain.gateway.traffic import bucket_quantile


async def policy_of(db: asyncpg.Pool, workload_id: str) -> tuple[AutoscalingPolicy, str] | None:
    """The workload's policy and who set it; None when it has none."""
    row = await db.fetchrow("select policy, set_by from autoscaling_policies where workload_id = $1", workload_id)
    return (AutoscalingPolicy.model_validate(row["policy"]), row["set_by"]) if row else None


async def set_policy(db: asyncpg.Pool, workload_id: str, policy: AutoscalingPolicy, set_by: str) -> None:
    await db.execute(
        """insert into autoscaling_policies (workload_id, policy, set_by) values ($1, $2, $3)
           on conflict (workload_id) do update set policy = excluded.policy, set_by = excluded.set_by,
               set_at = now()""",
        workload_id, policy.model_dump(mode="json"), set_by)


async def remove_policy(db: asyncpg.Pool, workload_id: str) -> bool:
    return (await db.execute("delete from autoscaling_policies where workload_id = $1", workload_id)) != "DELETE 0"


async def record_decision(db: asyncpg.Pool, *, workload_id: str, source: str, step: str, decision: Decision,
                          outcome: str, note: str = "") -> None:
    """One decision and what came of it; a retried write (same source and step) keeps the first."""
    await db.execute(
        """insert into autoscale_decisions (workload_id, source, step, action, replicas_from, replicas_to, outcome,
                                            words, note, reasons, inputs, at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) on conflict (source, step) do nothing""",
        workload_id, source, step, decision.action, decision.replicas_from, decision.replicas_to, outcome,
        decision.words(), note, decision.reasons, decision.inputs.model_dump(mode="json"), decision.inputs.at)


async def decisions_of(db: asyncpg.Pool, workload_id: str, *, limit: int = 50, since: datetime | None = None,
                       changes_only: bool = False) -> list[dict[str, Any]]:
    """The newest decisions first; `since`: taken at or after it; `changes_only`: scales (done or not), no holds."""
    rows = await db.fetch(
        "select action, replicas_from, replicas_to, outcome, words, note, reasons, inputs, at, source, step "
        "from autoscale_decisions where workload_id = $1 and ($3::timestamptz is null or at >= $3) "
        "and (not $4 or action <> 'hold') order by at desc, step desc limit $2",
        workload_id, limit, since, changes_only)
    return [dict(r) for r in rows]


async def workload_now(db: asyncpg.Pool, workload_id: str) -> dict[str, Any] | None:
    """The workload's state, replicas and the plan's capacity per replica (a workload sized by a traffic target)."""
    row = await db.fetchrow("select state, team, spec from workloads where id = $1", workload_id)
    if row is None:
        return None
    spec = row["spec"] or {}
    conf = (spec.get("sized_by") or {}).get("configuration") or {}
    return {"state": row["state"], "team": row["team"], "replicas": int(spec.get("replicas") or 0),
            "capacity": conf.get("requests_per_second_per_replica")}


async def samples_of(db: asyncpg.Pool, workload_id: str, *, now: datetime, seconds: float) -> list[Sample]:
    """One sample per slot of the last `seconds`, oldest first, every backend of the workload added up. A slot
    the sampler read but nobody called is a sample of no traffic; none at all when the sampler has not read
    the gateways lately (no measurement is not "no traffic")."""
    latest = await traffic_samples.latest_sample_at(db)
    slot = timedelta(seconds=traffic_samples.SLOT_SECONDS)
    if latest is None or latest < now - 2 * slot:
        return []
    start = now - timedelta(seconds=seconds)
    by_backend = await traffic_samples.traffic_by_backend(db, start=start, end=now, workload_id=workload_id)
    slots: dict[datetime, dict[str, Interval]] = {}
    for backend, intervals in by_backend.items():
        for interval in intervals:
            slots.setdefault(traffic_samples.slot_of(interval.end), {})[backend] = interval
    spans: list[tuple[datetime, datetime, dict[str, Interval]]] = []
    at, last = traffic_samples.slot_of(start), traffic_samples.slot_of(min(now, latest))
    while at <= last:
        end = min(at + slot, latest)
        if end > at:
            spans.append((at, end, slots.get(at, {})))
        at += slot
    if len(spans) > 1 and spans[-1][1] - spans[-1][0] < slot / 2:
        # The slot under way has counted a few seconds only: a rate or a p95 over so few requests is noise
        # (Poisson's), and the loop sizes on a window's highest rate, so it is counted with the slot before.
        (at, _, before), (_, end, newest) = spans[-2], spans[-1]
        merged = {b: whole([i for i in (before.get(b), newest.get(b)) if i is not None])
                  for b in before.keys() | newest.keys()}
        spans[-2:] = [(at, end, merged)]
    return [_sample(at, end, found) for at, end, found in spans]


def _sample(start: datetime, end: datetime, found: dict[str, Interval]) -> Sample:
    """One slot's sample. Each backend's rate is over the readings its counts span (`Interval.start`/`end`,
    kept with the slot), not over the slot's nominal seconds: the counts of a slot run from the reading
    before it began, so over the slot under way (a few seconds) the nominal span would overstate the rate."""
    backends = {b: {"requests_per_second": i.requests_per_second, "ttft_p95_ms": _p95_ms(i)}
                for b, i in sorted(found.items())}
    total = whole(list(found.values())) if found else None
    return Sample(start=start, end=end,
                  requests_per_second=sum(i.requests_per_second for i in found.values()),
                  ttft_p95_ms=_p95_ms(total) if total else None, backends=backends)


def _p95_ms(interval: Interval) -> float | None:
    q = bucket_quantile(0.95, list(interval.counts.first_byte.items()))
    return None if q is None else q * 1000

"""The sampled gateway counters (migration 0008): written by the traffic sampler only, read by the
console's traffic charts.

Each reading is differenced when it is written (wingsmith.adapters.gateway.traffic_history.increases) against the
gateway replica's previous reading, kept in Postgres so any API replica that takes over the sampling
continues the count, and added into its backend's slot of SLOT_SECONDS with every other replica's. A
page then reads at most window / SLOT_SECONDS rows per backend, already added up, so what it costs is
bounded by the picture, not by how often or how many gateways were read. Bounded by age: each write
deletes what fell out of the window kept."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from wingsmith.adapters.gateway.traffic_history import Interval, Series, increases, whole
from wingsmith.domain.gateway.traffic import BackendCounters

Connection = asyncpg.Connection | PoolConnectionProxy  # the sampler's own, or one of a pool's

SLOT_SECONDS = 20  # an hour in 180 points, the most a chart draws (console/traffic_charts.py)


def workload_of(backend: str) -> str | None:
    """The workload a gateway backend id names (`<cluster>/<workload>[/r<revision>]`, wingsmith.domain.endpoints)."""
    parts = backend.split("/")
    return parts[1] if len(parts) >= 2 and parts[1] else None


def slot_of(at: datetime) -> datetime:
    """The start of the slot a reading taken at `at` adds to."""
    t = at.timestamp()
    return datetime.fromtimestamp(t - t % SLOT_SECONDS, UTC)


def _buckets(histogram: dict[float, float]) -> tuple[list[float], list[float]]:
    """(bounds, counts). Every bound kept once anything was counted (a missing bound would move the
    quantiles' interpolation); none when nothing was, which is most slots of most series."""
    if not any(histogram.values()):
        return [], []
    return list(histogram), list(histogram.values())


def _interval(r: asyncpg.Record) -> Interval:
    counts = BackendCounters.model_construct(
        requests=r["requests"], failures=r["failures"], cooldowns=r["cooldowns"],
        duration=dict(zip(r["duration_le"], r["duration"], strict=True)),
        first_byte=dict(zip(r["first_byte_le"], r["first_byte"], strict=True)))
    return Interval(start=r["start_at"], end=r["end_at"], counts=counts)


_COLUMNS = ("start_at, end_at, requests, failures, cooldowns, duration_le, duration, first_byte_le, first_byte")


async def record_samples(conn: Connection | asyncpg.Pool, *, at: datetime, gateway: str,
                         counters: dict[Series, BackendCounters], keep_seconds: float) -> int:
    """One gateway replica's reading at `at`: its increases since its previous reading added into their
    slots, the reading kept for the next one, and what is older than the window dropped (every
    gateway's). Returns how many slots were dropped. A repeated (or late) write of a reading changes
    nothing."""
    async with _transaction(conn) as tx:
        previous_at: datetime | None = await tx.fetchval(
            "select read_at from traffic_gateway_reads where gateway = $1 for update", gateway)
        if previous_at is not None and previous_at >= at:
            return 0
        previous: dict[Series, BackendCounters] | None = None
        # A reading older than the window says nothing about now: the gateway starts its count again.
        if previous_at is not None and previous_at >= at - timedelta(seconds=keep_seconds):
            previous = {(r["endpoint"], r["backend"]): BackendCounters.model_validate(r["counters"])
                        for r in await tx.fetch("select endpoint, backend, counters from traffic_readings "
                                                "where gateway = $1", gateway)}
        grown = increases(previous, counters)
        if grown and previous_at is not None:
            await _add_to_slot(tx, slot_of(at), previous_at, at, grown)
        await tx.execute("insert into traffic_gateway_reads (gateway, read_at) values ($1, $2) on conflict (gateway) "
                         "do update set read_at = excluded.read_at", gateway, at)
        await tx.execute("delete from traffic_readings where gateway = $1", gateway)
        await tx.executemany(
            "insert into traffic_readings (gateway, endpoint, backend, counters) values ($1, $2, $3, $4)",
            [(gateway, endpoint, backend, c.model_dump(mode="json")) for (endpoint, backend), c in counters.items()])
        oldest = at - timedelta(seconds=keep_seconds)
        pruned = await tx.execute("delete from traffic_slots where end_at < $1", oldest)
        # Replicas gone for longer than the window (a pod replaced): their last readings go too.
        await tx.execute("delete from traffic_gateway_reads where read_at < $1", oldest)
    return int(pruned.split()[-1])


async def _add_to_slot(tx: Connection, slot: datetime, start: datetime, end: datetime,
                       grown: dict[Series, BackendCounters]) -> None:
    # Added in Python (the slot's rows are locked by the gateway's own lock and the sampler's): two
    # gateway versions with other bucket bounds still add up bound by bound.
    held = {(r["endpoint"], r["backend"]): _interval(r) for r in await tx.fetch(
        f"select endpoint, backend, {_COLUMNS} from traffic_slots where slot_at = $1 and endpoint = any($2::text[]) "
        "for update", slot, sorted({e for e, _ in grown}))}
    rows = []
    for (endpoint, backend), c in grown.items():
        now = Interval(start=start, end=end, counts=c)
        was = held.get((endpoint, backend))
        total = whole([was, now]) if was is not None else now
        t = total.counts
        rows.append((endpoint, backend, slot, workload_of(backend), total.start, total.end, t.requests, t.failures,
                     t.cooldowns, *_buckets(t.duration), *_buckets(t.first_byte)))
    await tx.executemany(
        f"insert into traffic_slots (endpoint, backend, slot_at, workload_id, {_COLUMNS}) "
        "values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) on conflict (endpoint, backend, slot_at) do "
        "update set start_at = excluded.start_at, end_at = excluded.end_at, requests = excluded.requests, "
        "failures = excluded.failures, cooldowns = excluded.cooldowns, duration_le = excluded.duration_le, "
        "duration = excluded.duration, first_byte_le = excluded.first_byte_le, first_byte = excluded.first_byte",
        rows)


async def traffic_by_backend(pool: asyncpg.Pool, *, start: datetime, end: datetime, endpoint: str | None = None,
                             workload_id: str | None = None) -> dict[str, list[Interval]]:
    """Backend → what it counted in the slots that end after `start` (and began by `end`), one interval
    per slot, oldest first: of one endpoint, or of one workload over every endpoint."""
    if (endpoint is None) == (workload_id is None):
        raise ValueError("name an endpoint or a workload")
    subject, value = ("endpoint", endpoint) if endpoint is not None else ("workload_id", workload_id)
    rows = await pool.fetch(
        f"select backend, slot_at, {_COLUMNS} from traffic_slots where {subject} = $1 and end_at > $2 "
        "and slot_at <= $3 order by backend, slot_at", value, start, end)
    slots: dict[str, dict[datetime, list[Interval]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        slots[r["backend"]][r["slot_at"]].append(_interval(r))
    return {backend: [_endpoints_added(found) for found in by_slot.values()] for backend, by_slot in slots.items()}


def _endpoints_added(found: list[Interval]) -> Interval:
    """One backend's slot over the endpoints routing it. The cooldown counter has no endpoint label: each
    endpoint reports the backend's, so it is counted once, not once per endpoint."""
    if len(found) == 1:
        return found[0]
    total = whole(found)
    total.counts.cooldowns = max(i.counts.cooldowns for i in found)  # counts made just now by whole()
    return total


async def latest_sample_at(pool: asyncpg.Pool) -> datetime | None:
    return await pool.fetchval("select max(read_at) from traffic_gateway_reads")


@asynccontextmanager
async def _transaction(conn: Connection | asyncpg.Pool) -> AsyncIterator[Connection]:
    """A transaction on the connection the caller holds (the sampler's, which also holds its lock), or on
    one taken from a pool for the duration."""
    if isinstance(conn, asyncpg.Pool):
        async with conn.acquire() as held, held.transaction():
            yield held
    else:
        async with conn.transaction():
            yield conn

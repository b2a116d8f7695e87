"""The console's traffic section: what a page costs to read, before and after storing increases.

    python bench/traffic.py [--backends 10] [--minutes 65] [--replicas 1] [--runs 5]

One real PostgreSQL (embedded), one set of readings: every gateway replica read every 10 s for
`--minutes`, each reading counting `--backends` backends with the gateway's 17-bucket histograms.
The same readings are stored two ways, in the same run:

before: every cumulative reading kept (the first form of migration 0008), loaded at page time and
        differenced in Python (wingsmith.adapters.gateway.traffic_history.increases, reading after reading),
        then added into the chart's 180 intervals per backend in Python.
after:  each reading differenced when written and added into its backend's 20-second slot
        (wingsmith.adapters.store.traffic_samples.record_samples); the page reads at most 180 slots per backend
        (console.traffic_charts.traffic_section, the real page section, charts and tables drawn).

Printed: the median and worst of `--runs` page reads each way (and the after page's read alone, without
drawing), the write cost per reading, and the requests each way counted (they must agree).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.traffic_charts import CHART_POINTS, WINDOW_SECONDS, backend_view, traffic_section  # noqa: E402
from wingsmith.adapters.gateway.traffic_history import Interval, Series, increases, rolled_up  # noqa: E402
from wingsmith.adapters.store import traffic_samples  # noqa: E402
from wingsmith.adapters.store.db import migrate, open_pool  # noqa: E402
from wingsmith.domain.config import Settings  # noqa: E402
from wingsmith.domain.gateway.traffic import BackendCounters  # noqa: E402
from wingsmith.local.ports import free_port
from wingsmith.local.postgres import LocalPostgres  # noqa: E402

ENDPOINT = "bench-model"
BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, float("inf"))
PERIOD = 10.0

# The first form of migration 0008, kept here only as the baseline.
BEFORE_TABLE = """
create table bench_cumulative_readings (
    at timestamptz not null, gateway text not null, endpoint text not null, backend text not null,
    counters jsonb not null, primary key (endpoint, backend, gateway, at))"""


def readings(backends: int, ticks: int, replicas: int, seed: int = 7):
    """(tick, gateway, {series: cumulative counters}) in time order; one replica restarts half way."""
    rng = random.Random(seed)
    state: dict[tuple[str, Series], list[float]] = {}
    for t in range(ticks):
        for r in range(replicas):
            gateway = f"http://10.0.0.{r + 1}:8080"
            if r == 0 and t == ticks // 2:  # a restart: its counters begin again
                state = {k: v for k, v in state.items() if k[0] != gateway}
            out = {}
            for b in range(backends):
                series = (ENDPOINT, f"cluster-{b % 3}/wl-{b}")
                c = state.setdefault((gateway, series), [0.0] * (len(BOUNDS) + 2))
                n = rng.randint(0, 40)
                c[0] += n
                c[1] += rng.randint(0, 1) if n else 0
                for _ in range(n):  # each request lands in the buckets at and above its latency
                    first = rng.randint(2, len(BOUNDS) - 1)
                    for i in range(first, len(BOUNDS)):
                        c[2 + i] += 1
                out[series] = BackendCounters.model_construct(
                    requests=int(c[0]), failures=int(c[1]), cooldowns=0,
                    duration=dict(zip(BOUNDS, c[2:2 + len(BOUNDS)], strict=True)),
                    first_byte=dict(zip(BOUNDS, c[2:2 + len(BOUNDS)], strict=True)))
            yield t, gateway, out


async def page_before(pool, start: datetime, end: datetime) -> dict[str, int]:
    """The page as it was: every cumulative reading loaded, differenced and rolled up in Python."""
    rows = await pool.fetch("select at, gateway, endpoint, backend, counters from bench_cumulative_readings "
                            "where endpoint = $1 and at >= $2 order by at", ENDPOINT, start - timedelta(seconds=30))
    by_gateway: dict[str, dict[datetime, dict[Series, BackendCounters]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        by_gateway[r["gateway"]][r["at"]][(r["endpoint"], r["backend"])] = BackendCounters.model_validate(r["counters"])
    spans: dict[str, list[Interval]] = defaultdict(list)
    for ticks in by_gateway.values():
        previous, before = None, None
        for at in sorted(ticks):
            for (_, backend), grown in increases(previous, ticks[at]).items():
                if at > start and before is not None:
                    spans[backend].append(Interval(start=before, end=at, counts=grown))
            previous, before = ticks[at], at
    views = [backend_view(b, rolled_up(sorted(s, key=lambda i: i.end), WINDOW_SECONDS / CHART_POINTS), start, end)
             for b, s in sorted(spans.items())]
    return {v.backend: v.total.requests for v in views}


async def page_after(pool, settings: Settings, end: datetime) -> dict[str, int]:
    section = await traffic_section(pool, settings, endpoint=ENDPOINT, now=end)
    return {v.backend: v.total.requests for v in section.backends}


async def read_only(pool, start: datetime, end: datetime) -> dict[str, int]:
    """The after page's read alone (its rows fetched and turned into intervals; nothing drawn)."""
    spans = await traffic_samples.traffic_by_backend(pool, start=start, end=end, endpoint=ENDPOINT)
    return {b: sum(i.counts.requests for i in s) for b, s in spans.items()}


async def timed(runs: int, read) -> tuple[list[float], list[float], dict[str, int]]:
    """Wall time of each read, and this process's CPU time (what the page costs the API process, apart
    from waiting for Postgres or for a busy machine's cores)."""
    times, cpu, result = [], [], {}
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        result = await read()
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return times, cpu, result


async def run(args: argparse.Namespace, pg: LocalPostgres) -> None:
    pool = await open_pool(pg.dsn(), max_size=4)
    try:
        await migrate(pool)
        await pool.execute(BEFORE_TABLE)
        ticks = int(args.minutes * 60 / PERIOD)
        t0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
        write_ms = []
        for t, gateway, counters in readings(args.backends, ticks, args.replicas):
            at = t0 + timedelta(seconds=PERIOD * t)
            await pool.executemany(
                "insert into bench_cumulative_readings values ($1, $2, $3, $4, $5)",
                [(at, gateway, e, b, c.model_dump(mode="json")) for (e, b), c in counters.items()])
            w0 = time.perf_counter()
            await traffic_samples.record_samples(pool, at=at, gateway=gateway, counters=counters,
                                                 keep_seconds=WINDOW_SECONDS + 300)
            write_ms.append((time.perf_counter() - w0) * 1000)
        end = t0 + timedelta(seconds=PERIOD * (ticks - 1))
        start = end - timedelta(seconds=WINDOW_SECONDS)
        stored_before = await pool.fetchval("select count(*) from bench_cumulative_readings where at >= $1", start)
        stored_after = await pool.fetchval("select count(*) from traffic_slots where end_at > $1", start)
        settings = Settings(traffic_sample_seconds=PERIOD)
        await page_after(pool, settings, end)  # warm both (connections, plans)
        await page_before(pool, start, end)
        before, before_cpu, counted_before = await timed(args.runs, lambda: page_before(pool, start, end))
        after, after_cpu, counted_after = await timed(args.runs, lambda: page_after(pool, settings, end))
        read, read_cpu, counted_read = await timed(args.runs, lambda: read_only(pool, start, end))
    finally:
        await pool.close()
    print(f"traffic section of one endpoint: {args.backends} backends x {args.replicas} gateway replica(s), "
          f"read every {PERIOD:g} s, {WINDOW_SECONDS // 60} minutes drawn ({args.runs} runs each)")
    print(f"{'':8} {'rows in window':>15} {'median ms':>10} {'worst ms':>9} {'CPU ms (median)':>16} "
          f"{'requests counted':>17}")
    for name, rows, times, cpu, counted in (("before", stored_before, before, before_cpu, counted_before),
                                            ("after", stored_after, after, after_cpu, counted_after),
                                            ("  read", stored_after, read, read_cpu, counted_read)):
        print(f"{name:8} {rows:>15} {statistics.median(times):>10.1f} {max(times):>9.1f} "
              f"{statistics.median(cpu):>16.1f} {sum(counted.values()):>17}")
    print(f"speed-up: {statistics.median(before) / statistics.median(after):.1f}x; "
          f"write per reading (differenced, stored, pruned): median {statistics.median(write_ms):.1f} ms")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if counted_before != counted_after:
        raise SystemExit(f"the two ways disagree: {counted_before} vs {counted_after}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", type=int, default=10)
    parser.add_argument("--minutes", type=float, default=65)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="traffic-bench-") as tmp:
        pg = LocalPostgres(Path(tmp) / "pg", free_port(), durable=False).start()
        try:
            asyncio.run(run(args, pg))
        finally:
            pg.stop()


if __name__ == "__main__":
    main()

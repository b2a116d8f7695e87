"""The cost of planning by load: one estimate cold against the same estimate cached, and what an estimate adds
to a draft's history, read from the real workflow history beside its baseline (the same draft's estimates
workflow before any perf worker answered). Needs the `perf` extra.

A real plane (bench/load.py: Postgres, Temporal, the offline Hub, the simulated clusters, the worker and the
API) registers a draft; with no perf worker polling, its estimates workflow saves "no perf worker" and queues
its first ask: that history is the baseline. The ask it queued (the draft's first card × layout, as the
draft itself asks it) is then estimated here cold and cached, into the perf worker's own cache directory;
then a perf worker starts (a late one: it takes the queued ask, answered from that cache) and the draft's
history is read again once its first rows are on the draft.

    .venv/bin/python bench/perf.py [--model openai/gpt-oss-120b] [--cached-runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules, as when run directly

import httpx  # noqa: E402
import load  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402

from contracts.draft_performance import DraftPerformanceInput, performance_workflow_id  # noqa: E402
from contracts.ids import artifact_workflow_id_of  # noqa: E402
from wingsmith.adapters.perf.aiconfigurator import Estimator, tool_version  # noqa: E402
from wingsmith.domain.perf.estimates import EstimateRequest  # noqa: E402

DEFAULT_MODEL = "openai/gpt-oss-120b"
CACHED_RUNS = 20
WAIT_SECONDS = 3600  # a cold search on a busy machine


async def _until(check, what: str, timeout: float = 120, interval: float = 0.5) -> Any:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not (found := await check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)
    return found


async def history_size(client: Client, workflow_id: str) -> dict[str, int]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return {"events": len(history.events), "bytes": sum(e.ByteSize() for e in history.events)}


def estimate_cold_and_cached(home: Path, request: EstimateRequest, cached_runs: int) -> dict[str, Any]:
    estimator = Estimator(home)
    wall, cpu = time.perf_counter(), time.process_time()
    cold = estimator.estimate(request)
    cold_wall, cold_cpu = time.perf_counter() - wall, time.process_time() - cpu
    cached = []
    for _ in range(cached_runs):
        started = time.perf_counter()
        again = estimator.estimate(request)
        cached.append(time.perf_counter() - started)
        assert again.cached, "the second ask must come from the cache"
    return {"cold_seconds": round(cold_wall, 1), "cold_cpu_seconds": round(cold_cpu, 1),
            "cached_median_ms": round(statistics.median(cached) * 1000, 2),
            "cached_max_ms": round(max(cached) * 1000, 2), "cached_runs": cached_runs,
            "figures": [f"{e.mode} {e.configuration.tokens_per_second_per_gpu:.0f} tokens/s/GPU "
                        f"({e.configuration.parallelism})" if e.configuration else f"{e.mode}: {e.reason}"
                        for e in cold.entries]}


def start_perf_worker(plane: load.Plane) -> subprocess.Popen:
    """The perf worker as `wingsmith up` starts it, on the plane's queue and home (so, its cache)."""
    with (plane.root / "perf-worker.log").open("ab") as log:
        return subprocess.Popen([sys.executable, "-m", "worker.perf"], env=plane.env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def measure(model: str, cached_runs: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="wingsmith-perf-bench-"))
    try:
        plane = load.start_plane(root)
        try:
            return asyncio.run(_measure(plane, model, cached_runs))
        finally:
            load.stop_plane(plane)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _measure(plane: load.Plane, model: str, cached_runs: int) -> dict[str, Any]:
    perf: subprocess.Popen | None = None
    try:
        client = await Client.connect(plane.temporal.address, data_converter=pydantic_data_converter)
        async with httpx.AsyncClient(base_url=plane.api_url, timeout=60) as http:
            artifact = await load.new_draft(plane, http, model)
            workflow_id = performance_workflow_id(artifact_workflow_id_of(artifact), 1)
            handle = client.get_workflow_handle(workflow_id)

            async def queued() -> bool:
                return bool((await handle.describe()).raw_description.pending_activities)
            await _until(queued, "the draft's first ask queued on the perf queue")
            baseline = await history_size(client, workflow_id)
            asked = await _first_ask(client, workflow_id)
            figures = await asyncio.to_thread(estimate_cold_and_cached, plane.root / "home", asked, cached_runs)

            perf = await asyncio.to_thread(start_perf_worker, plane)
            started = time.monotonic()

            async def answered() -> bool:
                got = (await http.get(f"/v1/artifacts/{artifact}", headers=plane.headers(load.OPERATOR))).json()
                rows = (got.get("draft") or {}).get("performance") or []
                return any((r["card"], r["layout"]) == (asked.card, asked.layout) for r in rows)
            await _until(answered, "the draft's first rows", timeout=WAIT_SECONDS)
            late_worker_seconds = time.monotonic() - started
            after = await history_size(client, workflow_id)
            await handle.terminate("bench: one answer measured")
    finally:
        if perf is not None:
            perf.kill()
            perf.wait()
    return {"model": model, "card": asked.card, "layout": asked.layout, "isl": asked.isl, "osl": asked.osl,
            "tool": f"AIConfigurator {tool_version()}", **figures,
            "late_perf_worker_to_rows_seconds": round(late_worker_seconds, 1),
            "history_waiting": baseline, "history_after_one_answer": after,
            "history_added": {k: after[k] - baseline[k] for k in baseline}}


async def _first_ask(client: Client, workflow_id: str) -> EstimateRequest:
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        (params,) = await pydantic_data_converter.decode(
            event.workflow_execution_started_event_attributes.input.payloads, [DraftPerformanceInput])
        return params.requests[0]
    raise RuntimeError(f"{workflow_id} has no history")


def lines(r: dict[str, Any]) -> list[str]:
    base, after, added = r["history_waiting"], r["history_after_one_answer"], r["history_added"]
    return [
        f"{r['tool']}: {r['model']} on {r['card']}, {r['layout']}, ISL {r['isl']} / OSL {r['osl']} "
        "(the draft's first ask)",
        f"  estimate  cold {r['cold_seconds']:8.1f} s wall ({r['cold_cpu_seconds']:.1f} CPU-s)   cached median "
        f"{r['cached_median_ms']:.1f} ms (max {r['cached_max_ms']:.1f} ms, {r['cached_runs']} runs)",
        f"  draft history  waiting, no perf worker (baseline) {base['events']} events, {base['bytes']:,} bytes;  "
        f"after one answer {after['events']} events, {after['bytes']:,} bytes;  added +{added['events']} events, "
        f"+{added['bytes']:,} bytes",
        f"  a late perf worker: started to the draft's rows {r['late_perf_worker_to_rows_seconds']:.1f} s "
        "(its start, then the cached answer)",
        "  figures: " + "; ".join(r["figures"])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"a model of the offline Hub (default {DEFAULT_MODEL})")
    parser.add_argument("--cached-runs", type=int, default=CACHED_RUNS)
    args = parser.parse_args(argv)
    print("\n".join(lines(measure(args.model, args.cached_runs))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

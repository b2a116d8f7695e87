"""One performance report: each of the plane's costs measured side by side with its baseline, in one run.

    .venv/bin/python bench/report.py [--json OUT] [--quick] [--only placement,gateway,plane]

- journey_overhead_ratio (target <= 1.5): register -> draft -> approve -> workload serving through the API
  (bench/load.py), against bare Temporal running workflows of as many no-op activities at the same concurrency;
- resolve_p99_ratio (<= 2): cached GET /v1/artifacts/resolve at 8 concurrent callers, against GET /healthz
  at 8 concurrent callers, in 20 alternating blocks;
- gateway_p99_ratio (<= 1.5): a non-streaming chat completion through the gateway (bench/gateway.py),
  against the same request straight to the frontend, alternating;
- placement_10k_p99_cpu_ms (<= 100): `place()` over 10,000 clusters, CPU time of the calling thread
  (bench/placement.py), with the growth from 100 clusters.

Needs only the base install (no test extras). Every server it starts runs as its own process and is
stopped at the end. Prints a table; `--json OUT` also writes every figure behind it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules, as when run directly

import httpx  # noqa: E402
import load  # noqa: E402
import placement  # noqa: E402
from gateway import GatewayRig, paired_latency  # noqa: E402
from stats import summary  # noqa: E402

TARGETS = {"journey_overhead_ratio": 1.5, "resolve_p99_ratio": 2.0, "gateway_p99_ratio": 1.5,
           "placement_10k_p99_cpu_ms": 100.0}
MEASURES = ("placement", "gateway", "plane")


def ms(samples: list[float]) -> list[float]:
    return [s * 1000 for s in samples]


def measure_placement(quick: bool) -> dict[str, Any]:
    sizes = (100, 1_000, 10_000)
    rows = [placement.measure(count, runs=(20 if quick else 200) if count < 10_000 else (10 if quick else 40))
            for count in sizes]
    at_10k = rows[-1]
    return {"placement_10k_p99_cpu_ms": at_10k["cpu"]["p99_ms"], "placement": {
        "plan": placement.PLAN.model_dump(mode="json"), "growth": rows,
        "growth_cpu_p99_100_to_10k": round(at_10k["cpu"]["p99_ms"] / rows[0]["cpu"]["p99_ms"], 1),
        "growth_candidates_100_to_10k": round(at_10k["candidates"] / rows[0]["candidates"], 1)}}


def measure_gateway(quick: bool) -> dict[str, Any]:
    n = 300 if quick else 2000
    with GatewayRig() as rig, httpx.Client(timeout=10, trust_env=False) as http:
        rig.route(rig.east)
        direct, via = paired_latency(http, rig.east.url, rig.url, n)
    d, v = summary(ms(direct)), summary(ms(via))
    return {"gateway_p99_ratio": round(v["p99_ms"] / d["p99_ms"], 3), "gateway": {
        "request": "POST /v1/chat/completions, non-streaming, one keep-alive client, alternating direct/gateway",
        "direct": d, "via_gateway": v, "p50_ratio": round(v["p50_ms"] / d["p50_ms"], 3)}}


def measure_plane(quick: bool) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="wingsmith-report-"))
    plane = load.start_plane(root)
    try:
        return asyncio.run(_plane(plane, quick))
    finally:
        load.stop_plane(plane)
        shutil.rmtree(root, ignore_errors=True)


async def _plane(plane: load.Plane, quick: bool) -> dict[str, Any]:
    concurrency = 8
    limits = httpx.Limits(max_connections=concurrency * 2)
    async with httpx.AsyncClient(base_url=plane.api_url, timeout=60, limits=limits) as http:
        resolves, health, _wall = await load.resolve_and_healthz(plane, http, 400 if quick else 2000, concurrency)
        journey = await load.measure_journey(plane, http, 3 if quick else 12)
    r, h = summary(ms(resolves)), summary(ms(health))
    lat = summary(ms(journey.latencies))
    return {
        "resolve_p99_ratio": round(r["p99_ms"] / h["p99_ms"], 3),
        "resolve": {"concurrency": concurrency, "cached_resolve": r, "healthz": h},
        "journey_overhead_ratio": round(journey.overhead, 3),
        "journey": {"journeys": journey.journeys, "at_a_time": len(journey.models),
                    "models": journey.models, "activities_per_journey": journey.activities,
                    "local_activities_per_journey": journey.local_activities,
                    "plane_seconds": round(journey.wall, 3), "bare_temporal_seconds": round(journey.baseline, 3),
                    "per_journey": lat}}


RUNNERS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "placement": measure_placement, "gateway": measure_gateway, "plane": measure_plane}


def table(report: dict[str, Any]) -> str:
    rows = [("measure", "figure", "baseline (same run)", "ratio", "target", "met")]
    if "journey" in report:
        j = report["journey"]
        rows.append((f"journey ×{j['journeys']} ({j['activities_per_journey']} activities each)",
                     f"{j['plane_seconds']:.2f} s", f"bare Temporal {j['bare_temporal_seconds']:.2f} s",
                     f"{report['journey_overhead_ratio']:.2f}×", "≤ 1.5×", _met(report, "journey_overhead_ratio")))
    if "resolve" in report:
        r = report["resolve"]
        rows.append((f"cached resolve, {r['concurrency']} callers, p50/p99",
                     f"{r['cached_resolve']['p50_ms']:.2f}/{r['cached_resolve']['p99_ms']:.2f} ms",
                     f"/healthz {r['healthz']['p50_ms']:.2f}/{r['healthz']['p99_ms']:.2f} ms",
                     f"{report['resolve_p99_ratio']:.2f}×", "≤ 2×", _met(report, "resolve_p99_ratio")))
    if "gateway" in report:
        g = report["gateway"]
        via = g["via_gateway"]
        rows.append(("chat via gateway, p50/p99", f"{via['p50_ms']:.2f}/{via['p99_ms']:.2f} ms",
                     f"direct {g['direct']['p50_ms']:.2f}/{g['direct']['p99_ms']:.2f} ms",
                     f"{report['gateway_p99_ratio']:.2f}×", "≤ 1.5×", _met(report, "gateway_p99_ratio")))
    if "placement" in report:
        for row in report["placement"]["growth"]:
            last = row["clusters"] == 10_000
            rows.append((f"placement, {row['clusters']:,} clusters ({row['candidates']:,} can hold it), "
                         "CPU p50/p99", f"{row['cpu']['p50_ms']:.2f}/{row['cpu']['p99_ms']:.2f} ms",
                         f"plan on a built index p99 {row['indexed_cpu']['p99_ms']:.2f} ms", "",
                         "≤ 100 ms" if last else "", _met(report, "placement_10k_p99_cpu_ms") if last else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _met(report: dict[str, Any], key: str) -> str:
    return "yes" if report["met"][key] else "NO"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write every figure to this file")
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run, not a figure)")
    parser.add_argument("--only", default=",".join(MEASURES), help=f"comma-separated subset of {', '.join(MEASURES)}")
    args = parser.parse_args(argv)
    chosen = [m.strip() for m in args.only.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(MEASURES))
    if unknown:
        parser.error(f"unknown measure(s) {', '.join(unknown)}; choose from {', '.join(MEASURES)}")
    report: dict[str, Any] = {
        "command": " ".join(["bench/report.py", *(argv if argv is not None else sys.argv[1:])]),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
        "quick": args.quick}
    for name in MEASURES:
        if name in chosen:
            started = time.monotonic()
            report.update(RUNNERS[name](args.quick))
            print(f"  ({name} measured in {time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["targets"] = {k: v for k, v in TARGETS.items() if k in report}
    report["met"] = {k: report[k] <= v for k, v in report["targets"].items()}
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

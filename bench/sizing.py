"""Time to size every shipped model (the published configs in the repository's Hub snapshot,
sim/hub/snapshot.json) on every NVIDIA
card and every layout: one full fit check each at one node (two for multi-node layouts and P/D),
context 8192 and 16 sequences, including the per-GPU figures, the largest context and concurrency
and the search for the smallest GPU count on every card. Prints figures; run with `.venv/bin/python bench/sizing.py`."""

from __future__ import annotations

import json
import statistics
import sys
import time

from sim.hub import load_snapshot
from wingsmith.domain.hardware import NVIDIA_HARDWARE
from wingsmith.domain.sizing import LAYOUTS, InvalidLayout, estimate_weight_bytes, read_text_model
from wingsmith.domain.sizing.fit import fit_check_for
from wingsmith.domain.sizing.layouts import candidate_gpu_counts, plan

CONTEXT, CONCURRENCY = 8192, 16


def shipped() -> list[tuple[str, dict, int]]:
    """(repo, config, weight bytes): the published total where upstream has one, else the product's own
    estimate from the config (the snapshot's derived totals are the stand-in's, not the product's)."""
    models = []
    for repo, record in sorted(load_snapshot()["models"].items()):
        config = json.loads(next(f["content"] for f in record["files"] if f["path"] == "config.json"))
        published = record["weight_total"] if record["weight_total_kind"] == "published" else None
        models.append((repo, config, published or estimate_weight_bytes(read_text_model(config)).bytes))
    return models


def smallest_valid(model, layout, hw) -> int | None:
    for n in candidate_gpu_counts(layout, hw):
        try:
            plan(model, layout, n, hw)
            return n
        except InvalidLayout:
            continue
    return None


def main() -> int:
    rows, timings = [], []
    start = time.perf_counter()
    for repo, config, weight_bytes in shipped():
        model_start = time.perf_counter()
        model = read_text_model(config)
        for hw in NVIDIA_HARDWARE:
            for layout in LAYOUTS:
                if smallest_valid(model, layout, hw) is None:
                    rows.append((repo, hw.id, layout, "-", "n/a", "-", 0.0))
                    continue
                # The common deployment: one whole node, or two for multi-node layouts and P/D.
                gpus = hw.gpus_per_node * (1 if layout == "single_node_tp" else 2)
                t0 = time.perf_counter()
                try:
                    r = fit_check_for(model, weight_bytes, hw.id, layout, gpus, CONTEXT, CONCURRENCY)
                    verdict = r.verdict
                    smallest = next(s.gpus for s in r.smallest_gpus if s.hardware == hw.id) or "-"
                except InvalidLayout as e:
                    verdict, smallest = f"n/a ({e})", "-"
                dt = time.perf_counter() - t0
                timings.append(dt)
                rows.append((repo, hw.id, layout, gpus, verdict, smallest, dt))
        print(f"{repo:40s} sized on {len(NVIDIA_HARDWARE)} cards × {len(LAYOUTS)} layouts in "
              f"{(time.perf_counter() - model_start) * 1e3:8.1f} ms")
    total = time.perf_counter() - start
    print()
    print(f"{'model':40s} {'card':6s} {'layout':18s} {'gpus':>5s}  {'verdict':24s} {'smallest':>8s} {'ms':>7s}")
    for repo, hw, layout, gpus, verdict, smallest, dt in rows:
        print(f"{repo:40s} {hw:6s} {layout:18s} {gpus!s:>5s}  {verdict[:24]:24s} {smallest!s:>8s} "
              f"{dt * 1e3:7.2f}")
    print()
    print(f"fit checks: {len(timings)}; total {total:.2f} s; per check median "
          f"{statistics.median(timings) * 1e3:.2f} ms, max {max(timings) * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

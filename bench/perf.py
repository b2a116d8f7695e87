"""Cold against cached: how long AIConfigurator takes for one estimate (agg against disagg, one card and
layout), how long the same estimate takes once cached, and how many bytes one estimate adds to a
workflow's history (its activity result, as Temporal stores it). Needs the `perf` extra.

    .venv/bin/python bench/perf.py [model] [card ...]      # default: openai/gpt-oss-120b on h200 and gb200
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.perf import EstimateOutput
from wingsmith.perf.aiconfigurator import Estimator, tool_version
from wingsmith.perf.estimates import EstimateRequest

CACHED_RUNS = 20


def history_bytes(output: EstimateOutput) -> int:
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([output])
    return payload.ByteSize()


def main(model: str, cards: list[str]) -> None:
    print(f"AIConfigurator {tool_version()}: {model}, single_node_tp, ISL 4000 / OSL 1000")
    with tempfile.TemporaryDirectory(prefix="wingsmith-perf-bench-") as home:
        estimator = Estimator(Path(home))
        for card in cards:
            request = EstimateRequest(model=model, model_commit="0" * 40, card=card)
            started = time.perf_counter()
            cold = estimator.estimate(request)
            cold_s = time.perf_counter() - started
            cached = []
            for _ in range(CACHED_RUNS):
                started = time.perf_counter()
                again = estimator.estimate(request)
                cached.append(time.perf_counter() - started)
                assert again.cached
            figures = ", ".join(
                f"{e.mode} {e.configuration.tokens_per_second_per_gpu:.0f} tok/s/GPU ({e.configuration.parallelism})"
                if e.configuration else f"{e.mode}: {e.reason}" for e in cold.entries)
            print(f"{card:6} cold {cold_s:6.1f} s   cached median {statistics.median(cached) * 1000:6.1f} ms "
                  f"(max {max(cached) * 1000:.1f} ms)   history +{history_bytes(EstimateOutput(estimates=[cold]))} "
                  f"bytes   {figures}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0] if args else "openai/gpt-oss-120b", args[1:] or ["h200", "gb200"])

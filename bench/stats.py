"""Percentiles as the benchmarks report them: the nearest sample, no interpolation."""

from __future__ import annotations


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]

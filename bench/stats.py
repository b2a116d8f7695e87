"""Percentiles as the benchmarks report them: the nearest sample, no interpolation."""

from __future__ import annotations


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summary(samples_ms: list[float]) -> dict[str, float]:
    """The figures a report keeps of one series of milliseconds: count, p50, p99, max."""
    return {"n": len(samples_ms), "p50_ms": round(pct(samples_ms, 50), 3), "p99_ms": round(pct(samples_ms, 99), 3),
            "max_ms": round(max(samples_ms), 3)}

"""The traffic analysis of a progressive upgrade: at each weight step the new deployment is compared
with the old one over the dwell window, from the gateway's own counters (`wingsmith.domain.gateway.traffic`,
the numbers Prometheus has): error rate, p99 latency and p99 time to first byte (first token when
streaming). Past a threshold the upgrade rolls back, and the figures that failed are what it reports."""

from __future__ import annotations

from pydantic import BaseModel, Field

from wingsmith.domain.gateway.traffic import BackendTraffic


class UpgradeThresholds(BaseModel):
    max_error_rate_increase: float = Field(0.01, ge=0, le=1, description="new error rate minus old, absolute")
    max_p99_ratio: float = Field(1.5, ge=1, description="new p99 latency over old p99")
    max_ttft_p99_ratio: float = Field(1.5, ge=1, description="new p99 time to first byte over old")
    # Latencies this small are noise on any machine: a ratio is judged only above it.
    latency_floor_seconds: float = Field(0.05, ge=0)
    min_requests: int = Field(20, ge=1, description="fewer requests to the new version in a window: no verdict yet")


class StepVerdict(BaseModel):
    healthy: bool
    enough_traffic: bool
    figures: dict[str, float | int | None]
    failures: list[str] = Field(default_factory=list, description="each threshold crossed, with its figures")


def _ratio_failure(name: str, old: float | None, new: float | None, limit: float, floor: float) -> str | None:
    if new is None or new <= floor:
        return None
    base = max(old or 0.0, floor)
    if new / base > limit:
        return f"{name} {new * 1000:.0f} ms vs {base * 1000:.0f} ms (over {limit:g}x)"
    return None


def judge(old: BackendTraffic, new: BackendTraffic, t: UpgradeThresholds) -> StepVerdict:
    """Compare the new version with the old over one window. A window with too little traffic to the
    new version is not a verdict (`enough_traffic` false): the step dwells again or, at its end, holds."""
    old_rate, new_rate = old.error_rate or 0.0, new.error_rate or 0.0
    figures: dict[str, float | int | None] = {
        "old_requests": old.attempts, "new_requests": new.attempts,
        "old_error_rate": round(old_rate, 4), "new_error_rate": round(new_rate, 4),
        "old_p99_seconds": old.p99_seconds, "new_p99_seconds": new.p99_seconds,
        "old_ttft_p99_seconds": old.ttft_p99_seconds, "new_ttft_p99_seconds": new.ttft_p99_seconds}
    enough = new.attempts >= t.min_requests
    failures = []
    if new.attempts and new_rate - old_rate > t.max_error_rate_increase:
        failures.append(f"error rate {new_rate:.1%} vs {old_rate:.1%} (over +{t.max_error_rate_increase:.1%}; "
                        f"{new.failures + new.failed_attempts} of {new.attempts} failed)")
    # A p99 of a handful of requests is one slow request: latencies are judged only on enough traffic.
    latencies = (("p99 latency", old.p99_seconds, new.p99_seconds, t.max_p99_ratio),
                 ("p99 time to first byte", old.ttft_p99_seconds, new.ttft_p99_seconds, t.max_ttft_p99_ratio))
    for name, o, n, limit in latencies if enough else ():
        if (failure := _ratio_failure(name, o, n, limit, t.latency_floor_seconds)) is not None:
            failures.append(failure)
    # Errors are judged on any traffic: a version that fails everything it gets fails at once.
    return StepVerdict(healthy=not failures, enough_traffic=enough or bool(failures), figures=figures,
                       failures=failures)


def steps_problem(steps: list[int]) -> str | None:
    """Why these weight steps cannot be walked (None when they can): percents rising to 100."""
    if any(not 0 < p <= 100 for p in steps):
        return f"steps must be percents between 1 and 100, got {steps}"
    if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
        return f"steps must rise, got {steps}"
    if steps[-1] != 100:
        return f"steps must end at 100 (all traffic on the new version), got {steps}"
    return None


def same_repository(a: str, b: str) -> bool:
    """Two artifact ids (`<org>/<name>@<sha>`) of one Hugging Face repository (ids are case-insensitive)."""
    return a.rsplit("@", 1)[0].lower() == b.rsplit("@", 1)[0].lower()

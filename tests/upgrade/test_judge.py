"""`wingsmith.domain.upgrade.judge`: what one window's figures say about the new version."""

from wingsmith.domain.gateway.traffic import BackendTraffic
from wingsmith.domain.upgrade import UpgradeThresholds, judge

FAST = BackendTraffic(requests=100, failures=0, p50_seconds=0.05, p99_seconds=0.1, ttft_p99_seconds=0.05)


def _new(requests: int, p99: float, failures: int = 0) -> BackendTraffic:
    return BackendTraffic(requests=requests, failures=failures, p50_seconds=p99 / 2, p99_seconds=p99,
                          ttft_p99_seconds=p99 / 2)


def test_a_slow_p99_over_enough_requests_fails_with_its_figures():
    verdict = judge(FAST, _new(20, 0.4), UpgradeThresholds())
    assert not verdict.healthy and verdict.enough_traffic
    assert verdict.failures[0] == "p99 latency 400 ms vs 100 ms (over 1.5x)", verdict.failures


def test_a_p99_of_a_handful_of_requests_is_no_verdict_on_latency():
    # Three requests, one of them slow, is one unlucky scheduling, not a slow version.
    verdict = judge(FAST, _new(3, 0.4), UpgradeThresholds())
    assert verdict.healthy and not verdict.enough_traffic and not verdict.failures, verdict


def test_errors_are_judged_on_any_traffic():
    verdict = judge(FAST, _new(3, 0.01, failures=3), UpgradeThresholds())
    assert not verdict.healthy and verdict.enough_traffic
    assert verdict.failures == ["error rate 100.0% vs 0.0% (over +1.0%; 3 of 3 failed)"]


def test_latencies_under_the_floor_are_noise():
    verdict = judge(FAST, _new(50, 0.04), UpgradeThresholds(latency_floor_seconds=0.05))
    assert verdict.healthy and verdict.enough_traffic

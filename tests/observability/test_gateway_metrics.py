"""The local gateway's /metrics over real HTTP: answers by endpoint, backend and code, first-byte and
total latency, a retry and the cool-down that caused it, in-flight, and no label from a client's
made-up model name. Also the quantile estimate the console reads from those buckets."""

from __future__ import annotations

import httpx

from tests.gateway.conftest import MODEL, backends, gateway, token_file  # noqa: F401 - fixtures
from tests.gateway.test_local_gateway import chat, routes
from tests.observability.scrape import GATEWAY_FAMILIES, scrape, total
from wingsmith.domain.gateway.traffic import bucket_quantile, parse_traffic


def test_gateway_metrics_follow_answers_retries_and_cooldowns(gateway, backends):  # noqa: F811
    alpha, beta = backends
    gateway.client.set_routes(routes((alpha, 1), (beta, 1)))
    alpha.mode = "error"
    assert [chat(gateway).status_code for _ in range(4)] == [200] * 4
    assert chat(gateway, stream=True).status_code == 200
    made_up = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "no-such-model-123", "messages": []})
    assert made_up.status_code == 404

    m = scrape(f"{gateway.url}/metrics")
    assert GATEWAY_FAMILIES <= set(m), sorted(m)
    beta_id, alpha_id = f"sim-beta/{MODEL}", f"sim-alpha/{MODEL}"
    requests = m["wingsmith_gateway_requests"]
    assert total(requests, "wingsmith_gateway_requests_total", endpoint=MODEL, backend=beta_id, code="200") == 5
    assert total(requests, "wingsmith_gateway_requests_total", endpoint=MODEL, backend=alpha_id) == 0
    assert total(requests, "wingsmith_gateway_requests_total", endpoint="unrouted", backend="none", code="404") == 1
    assert not any("no-such-model" in str(s.labels) for fam in m.values() for s in fam)
    assert total(m["wingsmith_gateway_retries"], "wingsmith_gateway_retries_total", endpoint=MODEL) == 1
    assert total(m["wingsmith_gateway_cooldowns"], "wingsmith_gateway_cooldowns_total", backend=alpha_id) == 1
    assert total(m["wingsmith_gateway_time_to_first_byte_seconds"],
                 "wingsmith_gateway_time_to_first_byte_seconds_count", endpoint=MODEL, backend=beta_id) == 5
    assert total(m["wingsmith_gateway_in_flight_requests"], "wingsmith_gateway_in_flight_requests") == 0

    # The console's reading of the same page.
    traffic = parse_traffic(httpx.get(f"{gateway.url}/metrics").text, MODEL)
    assert traffic[beta_id].requests == 5 and traffic[beta_id].failures == 0
    assert 0 < traffic[beta_id].p50_seconds <= traffic[beta_id].p99_seconds


def test_bucket_quantile_interpolates_like_promql():
    # 10 observations: 4 in (0, 0.1], 6 in (0.1, 1]
    buckets = [(0.1, 4.0), (1.0, 10.0), (float("inf"), 10.0)]
    assert bucket_quantile(0.2, buckets) == 0.05
    assert abs(bucket_quantile(0.7, buckets) - 0.55) < 1e-9
    assert bucket_quantile(0.99, [(0.1, 0.0), (float("inf"), 3.0)]) == 0.1  # beyond the last finite bound
    assert bucket_quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None



def test_a_time_on_a_bucket_bound_counts_in_that_bucket_as_prometheus_histograms_do():
    from gateway.metrics import _Timings

    timings = _Timings()
    for seconds in (0.001, 0.005, 0.3, 1000.0):  # below the first bound, on it, between two, past the last
        timings.observe(seconds)
    buckets = dict(timings.cumulative())
    assert (buckets["0.005"], buckets["0.01"], buckets["0.5"], buckets["600.0"], buckets["+Inf"]) == (2, 2, 3, 3, 4)
    assert (timings.count, round(timings.sum, 3)) == (4, 1000.306)

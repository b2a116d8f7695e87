"""Reading a running process's /metrics as Prometheus does, with prometheus_client's own parser."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


def scrape(url: str) -> dict[str, list[Sample]]:
    """Family name → its samples; fails on anything the parser refuses."""
    r = httpx.get(url, timeout=10)
    assert r.status_code == 200, (url, r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("text/plain"), r.headers["content-type"]
    return {f.name: f.samples for f in text_string_to_metric_families(r.text)}


def total(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


API_FAMILIES = {"http_requests", "http_request_duration_seconds"}
WORKER_FAMILIES = {"wingsmith_artifacts_registered", "wingsmith_artifacts_decided", "wingsmith_review_wait_seconds",
                   "wingsmith_rollouts_started", "wingsmith_rollouts_succeeded", "wingsmith_rollouts_failed",
                   "wingsmith_replacements", "wingsmith_heals", "wingsmith_approval_to_serving_seconds",
                   "wingsmith_worker_sdk_metrics_up"}
GATEWAY_FAMILIES = {"wingsmith_gateway_requests", "wingsmith_gateway_request_duration_seconds",
                    "wingsmith_gateway_time_to_first_byte_seconds", "wingsmith_gateway_in_flight_requests",
                    "wingsmith_gateway_cooldowns", "wingsmith_gateway_retries",
                    "wingsmith_gateway_backend_cooling_down"}


def check_plane_after_demo(api: str, worker: str, gateway: str, endpoint: str) -> None:
    """What a fresh plane exports after one demo journey (register, approve, serve, one chat)."""
    api_m = scrape(f"{api}/metrics")
    assert API_FAMILIES <= set(api_m), sorted(api_m)
    assert total(api_m["http_requests"], "http_requests_total", method="POST", route="/v1/artifacts",
                 code="202") >= 1, [s for s in api_m["http_requests"] if s.labels.get("route") == "/v1/artifacts"]
    # Route templates, never concrete paths: no label value carries an id.
    routes = {s.labels["route"] for s in api_m["http_requests"]}
    assert "/v1/workloads/{workload_id}" in routes or any("{" in r for r in routes), routes
    assert not any("Kimi" in r for r in routes), routes

    worker_m = scrape(f"{worker}/metrics")
    assert WORKER_FAMILIES <= set(worker_m), sorted(worker_m)
    assert total(worker_m["wingsmith_worker_sdk_metrics_up"], "wingsmith_worker_sdk_metrics_up") == 1
    temporal = [name for name in worker_m if name.startswith("temporal_")]
    assert "temporal_workflow_completed" in worker_m or len(temporal) >= 5, sorted(worker_m)
    assert total(worker_m["wingsmith_artifacts_registered"], "wingsmith_artifacts_registered_total") == 1
    assert total(worker_m["wingsmith_artifacts_decided"], "wingsmith_artifacts_decided_total", decision="approved") == 1
    assert total(worker_m["wingsmith_review_wait_seconds"], "wingsmith_review_wait_seconds_count") == 1
    assert total(worker_m["wingsmith_rollouts_succeeded"], "wingsmith_rollouts_succeeded_total") >= 1
    assert total(worker_m["wingsmith_approval_to_serving_seconds"], "wingsmith_approval_to_serving_seconds_count") == 1

    gateway_m = scrape(f"{gateway}/metrics")
    assert GATEWAY_FAMILIES <= set(gateway_m), sorted(gateway_m)
    assert total(gateway_m["wingsmith_gateway_requests"], "wingsmith_gateway_requests_total",
                 endpoint=endpoint, code="200") > 0, gateway_m["wingsmith_gateway_requests"]
    assert total(gateway_m["wingsmith_gateway_time_to_first_byte_seconds"],
                 "wingsmith_gateway_time_to_first_byte_seconds_count", endpoint=endpoint) > 0

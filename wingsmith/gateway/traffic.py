"""An endpoint's traffic per backend, read from the local gateway's Prometheus metrics: the console
shows these numbers, so it says exactly what Prometheus and the dashboard say (one set of counters,
counted since the gateway started). Quantiles are estimated from the histogram's buckets the way
PromQL's histogram_quantile does (linear within the bucket)."""

from __future__ import annotations

import math
from collections import defaultdict

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

REQUESTS = "wingsmith_gateway_requests"
DURATION = "wingsmith_gateway_request_duration_seconds"


class BackendTraffic(BaseModel):
    requests: int  # answered, any status
    failures: int  # answered with a 5xx
    p50_seconds: float | None  # to the last byte; None before the first request
    p99_seconds: float | None


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """`buckets`: (upper bound, cumulative count), any order. None when nothing was counted."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower, below = 0.0, 0.0
    for upper, cumulative in ordered:
        if cumulative >= rank:
            if math.isinf(upper):  # beyond the last finite bound: that bound is all we know
                return lower
            inside = cumulative - below
            return lower + (upper - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = upper, cumulative
    return lower


def parse_traffic(text: str, endpoint: str) -> dict[str, BackendTraffic]:
    """Backend id → its traffic for `endpoint`, from a gateway's /metrics page."""
    requests: dict[str, int] = defaultdict(int)
    failures: dict[str, int] = defaultdict(int)
    buckets: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("endpoint") != endpoint:
                continue
            backend = s.labels.get("backend", "")
            if s.name == REQUESTS + "_total":
                requests[backend] += int(s.value)
                if s.labels.get("code", "").startswith("5"):
                    failures[backend] += int(s.value)
            elif s.name == DURATION + "_bucket":
                buckets[backend].append((float(s.labels["le"]), s.value))
    return {b: BackendTraffic(requests=requests[b], failures=failures[b], p50_seconds=bucket_quantile(0.5, buckets[b]),
                              p99_seconds=bucket_quantile(0.99, buckets[b]))
            for b in set(requests) | set(buckets)}


READ_TIMEOUT_SECONDS = 2.0  # a page must not hang on a gateway that does not answer


async def read_traffic(gateway_url: str, endpoint: str) -> dict[str, BackendTraffic] | None:
    """None when the gateway does not answer (the page then says "not reported")."""
    try:
        async with httpx.AsyncClient(timeout=READ_TIMEOUT_SECONDS, trust_env=False) as http:
            r = await http.get(gateway_url.rstrip("/") + "/metrics")
        if r.status_code != 200:
            return None
        return parse_traffic(r.text, endpoint)
    except (httpx.HTTPError, ValueError):
        return None

"""Reading the local gateway's /metrics over HTTP (the adapter side of wingsmith.domain.gateway.traffic,
which parses what is read here and stays free of I/O)."""

from __future__ import annotations

import httpx

from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.secrets import SecretUnavailable, read_secret_ref
from wingsmith.domain.gateway.traffic import BackendCounters, BackendTraffic, parse_all_counters, parse_traffic

READ_TIMEOUT_SECONDS = 2.0  # a page must not hang on a gateway that does not answer


def metrics_headers(admin_token_ref: str | None) -> dict[str, str]:
    """What the plane sends with a read of the local gateway's /metrics: its admin token, which the
    gateway asks for once its endpoints need client keys (the traffic is the operator's to see)."""
    if not admin_token_ref:
        return {}
    try:
        return {"Authorization": f"Bearer {read_secret_ref(admin_token_ref)}"}
    except SecretUnavailable:
        return {}  # an open gateway answers anyway; a keyed one says 401, which the caller reports


async def read_traffic(gateway_url: str, endpoint: str,
                       admin_token_ref: str | None = None) -> dict[str, BackendTraffic] | None:
    """None when the gateway does not answer (the page then says "not reported")."""
    try:
        async with httpx.AsyncClient(timeout=READ_TIMEOUT_SECONDS, trust_env=False,
                                     verify=default_tls(trust_env=False)) as http:
            r = await http.get(gateway_url.rstrip("/") + "/metrics", headers=metrics_headers(admin_token_ref))
        if r.status_code != 200:
            return None
        return parse_traffic(r.text, endpoint)
    except (httpx.HTTPError, ValueError):
        return None


class GatewayUnreadable(Exception):
    """The gateway's /metrics did not answer with counters (said without its token or the page)."""


async def read_all_counters(http: httpx.AsyncClient, gateway_url: str,
                            admin_token_ref: str | None = None) -> dict[tuple[str, str], BackendCounters]:
    """(endpoint, backend) → cumulative counters, for every endpoint one gateway counts (the sampler's read)."""
    url = gateway_url.rstrip("/") + "/metrics"
    try:
        r = await http.get(url, headers=metrics_headers(admin_token_ref), timeout=READ_TIMEOUT_SECONDS)
    except httpx.HTTPError as err:
        raise GatewayUnreadable(f"{url} did not answer ({type(err).__name__})") from None
    if r.status_code != 200:
        raise GatewayUnreadable(f"{url} answered {r.status_code}")
    try:
        return parse_all_counters(r.text)
    except ValueError as err:
        raise GatewayUnreadable(f"{url} sent a page that is not Prometheus text ({err})") from None

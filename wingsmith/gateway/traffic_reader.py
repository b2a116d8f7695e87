"""Reading the local gateway's /metrics over HTTP (the adapter side of wingsmith.gateway.traffic,
which parses what is read here and stays free of I/O)."""

from __future__ import annotations

import httpx

from wingsmith.gateway.traffic import BackendTraffic, parse_traffic
from wingsmith.secrets import SecretUnavailable, read_secret_ref

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
        async with httpx.AsyncClient(timeout=READ_TIMEOUT_SECONDS, trust_env=False) as http:
            r = await http.get(gateway_url.rstrip("/") + "/metrics", headers=metrics_headers(admin_token_ref))
        if r.status_code != 200:
            return None
        return parse_traffic(r.text, endpoint)
    except (httpx.HTTPError, ValueError):
        return None

"""The plane's side of the local gateway's admin API (`gateway`)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import httpx

from wingsmith.adapters.gateway.client import GatewayError
from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.secrets import SecretUnavailable, read_secret_ref
from wingsmith.domain.gateway.routes import EndpointRoutes, RouteStatus

_RETRYABLE_STATUSES = {408, 429, 500, 502, 503, 504}


class LocalGatewayClient:
    """`token_ref` is an env var name, `env:NAME` or `file:<path>`; it is read on every call, so a
    rotated token is picked up without a restart, and the token never sits in this object."""

    def __init__(self, base_url: str, token_ref: str, *, timeout: float = 10.0, attempts: int = 3,
                 transport: httpx.BaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self.token_ref = token_ref
        self.attempts = attempts
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False, transport=transport,
                                  verify=default_tls(trust_env=False))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LocalGatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- GatewayClient ---------------------------------------------------------------------------

    def get_routes(self) -> list[EndpointRoutes]:
        return [s.routes for s in self.statuses()]

    def statuses(self) -> list[RouteStatus]:
        body = self._call("GET", "/admin/routes", doing="listing the gateway's routes")
        return [RouteStatus.model_validate(item) for item in body["data"]]

    def get_route(self, model_name: str) -> EndpointRoutes | None:
        status = self.status(model_name)
        return status.routes if status else None

    def status(self, model_name: str) -> RouteStatus | None:
        body = self._call("GET", _path(model_name), doing=f"reading the routes of {model_name!r}", missing_ok=True)
        return None if body is None else RouteStatus.model_validate(body)

    def set_routes(self, routes: EndpointRoutes) -> EndpointRoutes:
        body = self._call("PUT", _path(routes.model_name), json=routes.model_dump(mode="json"),
                          doing=f"setting the routes of {routes.model_name!r}")
        return RouteStatus.model_validate(body).routes

    def delete_routes(self, model_name: str) -> bool:
        body = self._call("DELETE", _path(model_name), doing=f"deleting the routes of {model_name!r}")
        return bool(body["deleted"])

    # ---- draining --------------------------------------------------------------------------------

    def wait_drained(self, model_name: str, backend_id: str, *, grace: float, poll: float = 0.5) -> bool:
        """Wait until the backend has no request in flight, at most `grace` seconds.
        True when it drained, False when the grace period ran out first."""
        deadline = time.monotonic() + grace
        while True:
            status = self.status(model_name)
            entry = next((b for b in status.backends if b.id == backend_id), None) if status else None
            if entry is None or not entry.in_flight:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))

    # ---- HTTP ------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, *, doing: str, json: Any = None, missing_ok: bool = False) -> Any:
        try:
            token = read_secret_ref(self.token_ref)
        except SecretUnavailable as exc:
            raise GatewayError("GatewayTokenUnavailable", f"{doing}: {exc}", retryable=False) from None
        headers = {"Authorization": f"Bearer {token}"}
        for attempt in range(1, self.attempts + 1):
            try:
                resp = self._http.request(method, path, json=json, headers=headers)
            except httpx.HTTPError as exc:
                if attempt == self.attempts:
                    raise GatewayError("GatewayUnreachable", f"{doing}: {type(exc).__name__} talking to "
                                       f"{self.base_url}", retryable=True) from None
                time.sleep(0.1 * 2 ** (attempt - 1))
                continue
            if resp.status_code in _RETRYABLE_STATUSES and attempt < self.attempts:
                time.sleep(0.1 * 2 ** (attempt - 1))
                continue
            if resp.status_code == 404 and missing_ok:
                return None
            if resp.is_success:
                return resp.json()
            raise _error(resp, doing)
        raise AssertionError("unreachable")


def _path(model_name: str) -> str:
    # Model names may hold '/', which the gateway's {model:path} route takes as is.
    return "/admin/routes/" + quote(model_name, safe="/@:+")


def _error(resp: httpx.Response, doing: str) -> GatewayError:
    try:
        message = resp.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {resp.status_code}"
    kind = {401: "GatewayUnauthorized", 403: "GatewayForbidden", 404: "GatewayNotFound",
            422: "GatewayRejectedRoutes", 400: "GatewayRejectedRoutes"}.get(resp.status_code)
    if kind is None:
        kind = "GatewayServerError" if resp.status_code >= 500 else f"GatewayHttp{resp.status_code}"
    return GatewayError(kind, f"{doing}: {message}", retryable=resp.status_code in _RETRYABLE_STATUSES,
                        status=resp.status_code)

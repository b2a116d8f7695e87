"""Gateways: one model name for clients, routed to the deployments serving it.

The route model (`EndpointRoutes`, `Backend`) is shared by both gateways; the plane talks to
whichever is configured through the `GatewayClient` protocol: `LocalGatewayClient` (the embedded
router in `api.gateway`) or `EnvoyGatewayClient` (Envoy AI Gateway resources on a gateway cluster).

The names below load on first use: the route model and the traffic figures are pure (workflows and
contracts import them), and importing them must not load the clients, `httpx` or `kubernetes`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wingsmith.gateway.client import GatewayClient, GatewayError
    from wingsmith.gateway.configured import gateway_client
    from wingsmith.gateway.envoy import EnvoyGatewayClient, render_envoy_resources
    from wingsmith.gateway.local import LocalGatewayClient
    from wingsmith.gateway.routes import Backend, BackendStatus, EndpointRoutes, RouteStatus

_HOME = {"GatewayClient": "client", "GatewayError": "client", "gateway_client": "configured",
         "EnvoyGatewayClient": "envoy", "render_envoy_resources": "envoy", "LocalGatewayClient": "local",
         "Backend": "routes", "BackendStatus": "routes", "EndpointRoutes": "routes", "RouteStatus": "routes"}

__all__ = ["Backend", "BackendStatus", "EndpointRoutes", "EnvoyGatewayClient", "GatewayClient", "GatewayError",
           "LocalGatewayClient", "RouteStatus", "gateway_client", "render_envoy_resources"]


def __getattr__(name: str) -> object:
    if name in _HOME:
        return getattr(importlib.import_module(f"wingsmith.gateway.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

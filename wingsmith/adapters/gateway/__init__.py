"""Gateways, talked to: one model name for clients, routed to the deployments serving it.

The plane talks to whichever gateway is configured through the `GatewayClient` protocol:
`LocalGatewayClient` (the plane's own router, gateway/) or `EnvoyGatewayClient` (Envoy AI Gateway
resources on a gateway cluster). The route model they take is wingsmith/domain/gateway/.

The names below load on first use, so that importing one client does not load the other's libraries
(`httpx`, `kubernetes`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wingsmith.adapters.gateway.client import GatewayClient, GatewayError
    from wingsmith.adapters.gateway.configured import gateway_client
    from wingsmith.adapters.gateway.envoy import EnvoyGatewayClient, render_envoy_resources
    from wingsmith.adapters.gateway.local import LocalGatewayClient

_HOME = {"GatewayClient": "client", "GatewayError": "client", "gateway_client": "configured",
         "EnvoyGatewayClient": "envoy", "render_envoy_resources": "envoy", "LocalGatewayClient": "local"}

__all__ = ["EnvoyGatewayClient", "GatewayClient", "GatewayError", "LocalGatewayClient", "gateway_client",
           "render_envoy_resources"]


def __getattr__(name: str) -> object:
    if name in _HOME:
        return getattr(importlib.import_module(f"wingsmith.adapters.gateway.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

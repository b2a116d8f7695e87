"""Gateways: one model name for clients, routed to the deployments serving it.

The route model (`EndpointRoutes`, `Backend`) is shared by both gateways; the plane talks to
whichever is configured through the `GatewayClient` protocol: `LocalGatewayClient` (the embedded
router in `api.gateway`) or `EnvoyGatewayClient` (Envoy AI Gateway resources on a gateway cluster).
"""

from wingsmith.gateway.client import GatewayClient, GatewayError
from wingsmith.gateway.configured import gateway_client
from wingsmith.gateway.envoy import EnvoyGatewayClient, render_envoy_resources
from wingsmith.gateway.local import LocalGatewayClient
from wingsmith.gateway.routes import Backend, BackendStatus, EndpointRoutes, RouteStatus

__all__ = ["Backend", "BackendStatus", "EndpointRoutes", "EnvoyGatewayClient", "GatewayClient", "GatewayError",
           "LocalGatewayClient", "RouteStatus", "gateway_client", "render_envoy_resources"]

"""The local gateway: an OpenAI-compatible router, its own ASGI app (`create_gateway_app`), served by
`python -m gateway --port 8080`. The plane drives it through `wingsmith.adapters.gateway.LocalGatewayClient`."""

from gateway.app import create_gateway_app
from gateway.proxy import BACKEND_HEADER

__all__ = ["BACKEND_HEADER", "create_gateway_app"]

"""What the plane needs from a gateway, whichever one is configured.

Calls are blocking (the kubernetes client is synchronous): call them from sync activities.
Every call is idempotent: set_routes replaces an endpoint's routes as a whole, delete_routes of an
endpoint that has none succeeds, so a retried activity converges on the same state.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from wingsmith.domain.errors import TypedError
from wingsmith.domain.gateway.routes import EndpointRoutes, RouteStatus


class GatewayError(TypedError):
    """A gateway call failed. `type` names the failure (used as the ApplicationError type);
    `retryable` says whether trying again can help. Messages never carry credentials."""


@runtime_checkable
class GatewayClient(Protocol):
    def get_routes(self) -> list[EndpointRoutes]:
        """Every endpoint this gateway routes, as the plane last set it."""

    def get_route(self, model_name: str) -> EndpointRoutes | None:
        """One endpoint's routes, None when the gateway has none for it."""

    def set_routes(self, routes: EndpointRoutes) -> EndpointRoutes:
        """Make the endpoint's routes exactly `routes` (create or replace)."""

    def delete_routes(self, model_name: str) -> bool:
        """Remove every route of the endpoint; False when there was nothing to remove."""

    def status(self, model_name: str) -> RouteStatus | None:
        """Routes plus per-backend health and in-flight counts, as far as the gateway knows them."""

    def close(self) -> None:
        ...

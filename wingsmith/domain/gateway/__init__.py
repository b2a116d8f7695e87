"""What a gateway routes, as data: the route model both gateways take (`routes`) and the gateway's
counters parsed (`traffic`). Talking to a gateway is wingsmith/adapters/gateway/."""

from wingsmith.domain.gateway.routes import Backend, BackendStatus, EndpointRoutes, RouteStatus

__all__ = ["Backend", "BackendStatus", "EndpointRoutes", "RouteStatus"]

"""The route model both gateways share: which deployments answer one endpoint's model name, and
with what share of the traffic.

An endpoint's routes are replaced as a whole (set_routes), never patched backend by backend, so a
retried call always converges on the same state.
"""

from __future__ import annotations

import re
from datetime import datetime
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# What an OpenAI client may send as `model`: no control characters or whitespace, bounded length.
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
_BACKEND_ID = re.compile(r"^[a-z0-9]([-a-z0-9./]{0,118}[a-z0-9])?$")


class Backend(BaseModel):
    """One deployment's frontend that serves the endpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="unique within the endpoint, e.g. `sim-east/kimi-k3-abc123`")
    cluster: str = Field(min_length=1, max_length=63)
    workload_id: str = Field(min_length=1, max_length=200)
    url: str = Field(description="the frontend's base URL, without `/v1`: "
                                 "`http://host:port[/prefix]`")
    weight: int = Field(ge=0, le=10_000, description="share of new requests; 0 drains the backend")
    draining_until: datetime | None = Field(
        default=None, description="set while draining: when the plane may remove it even with "
                                  "requests still in flight")
    served_model: str | None = Field(
        default=None, description="the name the frontend serves, when it differs from the endpoint's")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _BACKEND_ID.fullmatch(value):
            raise ValueError(f"backend id {value!r} must be lower-case letters, digits, '-', '.' or '/', "
                             "start and end with a letter or digit, at most 120 characters")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"backend url {value!r} must be http:// or https:// with a host")
        if parts.query or parts.fragment:
            raise ValueError(f"backend url {value!r} must not carry a query or fragment")
        if parts.username or parts.password:
            # Credentials in a URL end up in logs and in rendered manifests.
            raise ValueError("backend url must not carry credentials")
        try:
            _ = parts.port  # urlsplit checks the port only when it is read
        except ValueError:
            raise ValueError(f"backend url {value!r} has an invalid port") from None
        if parts.path.rstrip("/").endswith("/v1"):
            raise ValueError(f"backend url {value!r} must be the frontend's base URL, without /v1")
        return value.rstrip("/")

    @field_validator("served_model")
    @classmethod
    def _served(cls, value: str | None) -> str | None:
        if value is not None and not _MODEL_NAME.fullmatch(value):
            raise ValueError(f"served model name {value!r} is not a valid model name")
        return value

    @property
    def draining(self) -> bool:
        return self.weight == 0

    def model_for(self, endpoint_model: str) -> str:
        return self.served_model or endpoint_model


class EndpointRoutes(BaseModel):
    """All backends of one endpoint (one model name for clients)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_name: str
    backends: list[Backend] = Field(default_factory=list, max_length=128)

    @field_validator("model_name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _MODEL_NAME.fullmatch(value):
            raise ValueError(f"model name {value!r} must start with a letter or digit and use only "
                             "letters, digits and . _ : / @ + -, at most 200 characters")
        return value

    @model_validator(mode="after")
    def _unique(self) -> EndpointRoutes:
        seen: set[str] = set()
        for backend in self.backends:
            if backend.id in seen:
                raise ValueError(f"backend id {backend.id!r} appears twice in the routes of {self.model_name!r}")
            seen.add(backend.id)
        return self

    def backend(self, backend_id: str) -> Backend | None:
        return next((b for b in self.backends if b.id == backend_id), None)

    @property
    def serving(self) -> list[Backend]:
        """Backends that take new requests."""
        return [b for b in self.backends if b.weight > 0]


class BackendStatus(BaseModel):
    """What a gateway knows about one backend right now. Fields a gateway cannot observe are None."""

    id: str
    weight: int
    healthy: bool | None = Field(description="None when the gateway does not report health")
    cooling_down: bool = False
    in_flight: int | None = Field(default=None, description="requests being answered; None if unknown")
    requests: int | None = None
    failures: int | None = None
    last_error: str | None = None


class RouteStatus(BaseModel):
    routes: EndpointRoutes
    backends: list[BackendStatus]

    @property
    def in_flight(self) -> int | None:
        counts = [b.in_flight for b in self.backends]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)

"""Bearer-token auth. Tokens map to a principal (a name and roles); the principal of a request comes
from its token only, never from the body, so an approval is always attributed to who sent it.

Roles and how they nest are in wingsmith/domain/roles.py.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Annotated

import structlog
from fastapi import Depends, Request
from pydantic import BaseModel

from api.errors import ApiError
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.oidc import KeysUnavailable, OidcVerifier, TokenRefused, looks_like_jwt
from wingsmith.domain.roles import ROLES, grants
from wingsmith.domain.teams import DEFAULT_TEAM, TEAM_NAME

log = get_logger("wingsmith.api.auth")
_TEAM = re.compile(TEAM_NAME)


class Principal(BaseModel, frozen=True):
    """Who sent a request: a name, roles, and the team that owns what it makes (workloads, endpoints,
    watches). Tokens without a team belong to DEFAULT_TEAM, so a single-team table keeps working."""
    name: str
    roles: frozenset[str]
    team: str = DEFAULT_TEAM

    def has(self, role: str) -> bool:
        return grants(self.roles, role)


class TokenTable:
    """Token → principal, compared in constant time."""

    def __init__(self, table: dict[str, Principal]):
        self._table = table

    @classmethod
    def from_json(cls, raw: str) -> TokenTable:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            # Where, not what: the text around the error would be a token.
            raise ValueError(f"WINGSMITH_AUTH_TOKENS is not valid JSON: {exc.msg} "
                             f"(line {exc.lineno} column {exc.colno})") from None
        if not isinstance(data, dict):
            raise ValueError("WINGSMITH_AUTH_TOKENS must be a JSON object {token: {name, roles}}")
        table = {}
        for i, (token, entry) in enumerate(data.items()):
            roles = frozenset(entry.get("roles", ())) if isinstance(entry, dict) else frozenset()
            unknown = roles - set(ROLES)
            if not isinstance(entry, dict) or "name" not in entry or not roles or unknown:
                # Index, not the token: the token must never reach an error message.
                raise ValueError(f"WINGSMITH_AUTH_TOKENS entry #{i + 1} needs a name and roles from "
                                 f"{', '.join(ROLES)}" + (f" (unknown: {sorted(unknown)})" if unknown else ""))
            team = entry.get("team", DEFAULT_TEAM)
            if not isinstance(team, str) or not _TEAM.match(team):
                raise ValueError(f"WINGSMITH_AUTH_TOKENS entry #{i + 1}: team must be a DNS-1123 label "
                                 "(a-z, 0-9, '-', at most 63)")
            table[token] = Principal(name=entry["name"], roles=roles, team=team)
        return cls(table)

    def lookup(self, token: str) -> Principal | None:
        found = None
        for candidate, principal in self._table.items():
            if hmac.compare_digest(candidate.encode(), token.encode()):
                found = principal
        return found

    def names_with(self, role: str) -> list[str]:
        """The names of everyone holding `role` (directly or through admin), for the review policy."""
        return sorted({p.name for p in self._table.values() if p.has(role)})

    def __len__(self) -> int:
        return len(self._table)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get("wingsmith_token") or None


async def authenticate(request: Request) -> Principal:
    token = _bearer(request)
    if token is None:
        raise ApiError(401, "missing bearer token (Authorization: Bearer <token>)",
                       headers={"WWW-Authenticate": "Bearer"})
    return await principal_for(request.app, token)


async def principal_for(app, token: str) -> Principal:
    """The principal a token names: the static table first (constant time), then, with single sign-on
    on and a token shaped like a JWT, the issuer's verdict (wingsmith/adapters/oidc.py)."""
    table: TokenTable = app.state.tokens
    principal = table.lookup(token)
    if principal is not None:
        return principal
    sso: OidcVerifier | None = getattr(app.state, "oidc", None)
    if sso is None or not looks_like_jwt(token):
        raise ApiError(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
    try:
        identity = await sso.identify(token)
    except TokenRefused as refused:
        log.info("oidc token refused", reason=str(refused))  # the reason only: never the token
        raise ApiError(401, f"token refused: {refused}",
                       headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}) from None
    except KeysUnavailable as exc:
        log.warning("oidc token not checked: the issuer's keys are unavailable", error=str(exc))
        raise ApiError(503, "the sign-in provider's keys cannot be fetched right now; try again shortly") from None
    # An authentic token the plane cannot place is refused as forbidden, not unauthenticated: signing in
    # again cannot help; the identity provider must grant a role or fix the team.
    if not identity.roles:
        raise ApiError(403, f"{identity.name} holds none of this plane's roles ({', '.join(ROLES)}) in the "
                            f"token's {sso.config.roles_claim} claim")
    team = identity.team or DEFAULT_TEAM
    if not _TEAM.match(team):
        raise ApiError(403, f"the token's {sso.config.team_claim} claim is not a team name this plane accepts "
                            "(a DNS-1123 label: a-z, 0-9, '-', at most 63)")
    return Principal(name=identity.name, roles=identity.roles, team=team)


def authorize(principal: Principal, role: str) -> Principal:
    if not principal.has(role):
        raise ApiError(403, f"{principal.name} lacks the {role} role")
    return principal


def bind_principal(principal: Principal) -> None:
    """Name who sent the request, and their team, on every log line written while it is handled
    (each request runs in its own context, so nothing carries over to the next)."""
    structlog.contextvars.bind_contextvars(principal=principal.name, team=principal.team)


def require(role: str):
    # One dependency, not one for the principal under one for the role: FastAPI solves each with a
    # pass of its own (its parameters, a cache key, the call); the second pass was about 8% of a
    # cached resolve's time in the API. `async def` because it does no blocking I/O: FastAPI runs a
    # plain `def` dependency in its thread pool, a thread hop per request for what is a dictionary
    # lookup (or, rarely, an async fetch of the sign-in provider's keys).
    async def dependency(request: Request) -> Principal:
        principal = await authenticate(request)
        bind_principal(principal)
        return authorize(principal, role)

    dependency.__name__ = f"require_{role}"
    return dependency


Viewer = Annotated[Principal, Depends(require("viewer"))]
Operator = Annotated[Principal, Depends(require("operator"))]
Approver = Annotated[Principal, Depends(require("approver"))]
Admin = Annotated[Principal, Depends(require("admin"))]

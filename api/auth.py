"""Bearer-token auth. Tokens map to a principal (a name and roles); the principal of a request comes
from its token only, never from the body, so an approval is always attributed to who sent it.

Roles and how they nest are in wingsmith/roles.py.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Annotated

from fastapi import Depends, Request
from pydantic import BaseModel

from api.errors import ApiError
from wingsmith.roles import ROLES, grants


DEFAULT_TEAM = "default"
_TEAM = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


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


def authenticate(request: Request) -> Principal:
    table: TokenTable = request.app.state.tokens
    token = _bearer(request)
    if token is None:
        raise ApiError(401, "missing bearer token (Authorization: Bearer <token>)",
                       headers={"WWW-Authenticate": "Bearer"})
    principal = table.lookup(token)
    if principal is None:
        raise ApiError(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
    return principal


def authorize(principal: Principal, role: str) -> Principal:
    if not principal.has(role):
        raise ApiError(403, f"{principal.name} lacks the {role} role")
    return principal


# Dependencies that do no I/O are `async def`: FastAPI runs a plain `def` dependency in its thread
# pool, a thread hop per dependency per request for what is a dictionary lookup.
async def current_principal(request: Request) -> Principal:
    return authenticate(request)


def require(role: str):
    async def dependency(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
        return authorize(principal, role)

    dependency.__name__ = f"require_{role}"
    return dependency


Viewer = Annotated[Principal, Depends(require("viewer"))]
Operator = Annotated[Principal, Depends(require("operator"))]
Approver = Annotated[Principal, Depends(require("approver"))]
Admin = Annotated[Principal, Depends(require("admin"))]

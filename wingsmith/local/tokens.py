"""The token table a local plane and its CLI share: `WINGSMITH_AUTH_TOKENS` when a team configured
one, else `$WINGSMITH_HOME/tokens.json`, created once by `wingsmith up` with two principals
(`local-admin`, `local-reviewer`) so four-eyes review works on one laptop (the file itself:
wingsmith/adapters/token_file.py, which the API reads too)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from wingsmith.adapters.token_file import local_admin_tokens
from wingsmith.domain.config import Settings
from wingsmith.domain.roles import grants

__all__ = ["TokenHolder", "holder_with", "local_admin_tokens", "token_holders"]


@dataclass(frozen=True)
class TokenHolder:
    token: str
    name: str
    roles: tuple[str, ...]


def token_holders(settings: Settings) -> list[TokenHolder]:
    """Every well-formed entry of the plane's table, in its order (malformed ones are the API's to refuse)."""
    raw = settings.auth_tokens
    if raw is None:
        try:
            raw = settings.tokens_file.read_text()
        except OSError:
            return []
    try:
        table = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(table, dict):
        return []
    return [TokenHolder(token, str(entry["name"]), tuple(entry.get("roles") or ()))
            for token, entry in table.items() if isinstance(entry, dict) and "name" in entry]


def holder_with(settings: Settings, role: str, *, not_named: str | None = None) -> TokenHolder | None:
    """The first holder granted `role` (admins hold every role), preferring one who holds it
    directly; `not_named` skips a principal (the approver of a four-eyes review is someone else)."""
    holders = [h for h in token_holders(settings) if grants(h.roles, role) and h.name != not_named]
    direct = [h for h in holders if role in h.roles]
    return (direct or holders)[0] if holders else None

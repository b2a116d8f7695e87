"""Roles and how they nest: admin ⊃ approver, operator ⊃ viewer. An approver is not an operator and
vice versa: the person who approves a draft is not meant to be the one who rolls things out.
The API enforces them (api/auth.py); the CLI uses them to pick a token from a table."""

from __future__ import annotations

from collections.abc import Iterable

ROLES = ("viewer", "operator", "approver", "admin")
IMPLIED = {
    "admin": frozenset({"admin", "approver", "operator", "viewer"}),
    "approver": frozenset({"approver", "viewer"}),
    "operator": frozenset({"operator", "viewer"}),
    "viewer": frozenset({"viewer"}),
}


def grants(roles: Iterable[str], role: str) -> bool:
    """Whether holding `roles` gives `role`."""
    return any(role in IMPLIED.get(r, frozenset()) for r in roles)

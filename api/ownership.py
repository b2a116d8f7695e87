"""Who may see and act on a team's objects (workloads, endpoints, watches): its own team, and admins.
To anyone else another team's object answers exactly as an absent one would (the caller passes the
404 its route gives for a missing object), so names of other teams' objects do not leak.

A viewer sees its own team's objects; an admin sees and acts on every team's.
"""

from __future__ import annotations

import asyncpg
from temporalio.client import Client

from api.auth import Principal
from api.errors import ApiError
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.starter import endpoint_status, workload_status
from wingsmith.adapters.store import endpoints as endpoint_store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.domain.teams import visible

log = get_logger("wingsmith.api.ownership")


def sees_all(principal: Principal) -> bool:
    return principal.has("admin")


def listing_team(principal: Principal) -> str | None:
    """The team whose objects a listing shows to this principal; None: every team's."""
    return None if sees_all(principal) else principal.team


def may_see(principal: Principal, owner: str | None) -> bool:
    return visible(owner, principal.team, sees_all=sees_all(principal))


def hide(principal: Principal, kind: str, name: str, owner: str | None, not_found: ApiError) -> None:
    """Raise `not_found` when the object (of team `owner`) is another team's."""
    if not may_see(principal, owner):
        log.info("refused: another team's object", kind=kind, object=name, owner_team=owner,
                 principal=principal.name, team=principal.team)
        raise not_found


async def workload_team(db: asyncpg.Pool, temporal: Client | None, workload_id: str) -> str | None:
    """The team that owns a workload; None when it does not exist. Just after its creation the registry
    may not hold its row yet: the running workflow knows its team then."""
    team = (await workload_store.workload_teams(db, [workload_id])).get(workload_id)
    if team is not None or temporal is None:
        return team
    try:
        return (await workload_status(temporal, workload_id)).team
    except Exception:  # noqa: BLE001 - no workflow (or none answering): nothing to own, the route says 404 or 503
        return None


async def endpoint_team(db: asyncpg.Pool, temporal: Client | None, name: str) -> str | None:
    """The team that owns an endpoint; None when it does not exist (see workload_team)."""
    row = await endpoint_store.get_endpoint(db, name)
    if row is not None or temporal is None:
        return row["team"] if row is not None else None
    try:
        return (await endpoint_status(temporal, name)).team
    except Exception:  # noqa: BLE001 - as above
        return None


async def own_workload(principal: Principal, db: asyncpg.Pool, temporal: Client | None, workload_id: str,
                       not_found: ApiError) -> None:
    """Before acting on a workload: another team's answers `not_found`; an absent one is left to the
    route (it answers its own 404)."""
    owner = await workload_team(db, temporal, workload_id)
    if owner is not None:
        hide(principal, "workload", workload_id, owner, not_found)


async def own_endpoint(principal: Principal, db: asyncpg.Pool, temporal: Client | None, name: str,
                       not_found: ApiError) -> None:
    owner = await endpoint_team(db, temporal, name)
    if owner is not None:
        hide(principal, "endpoint", name, owner, not_found)


async def foreign_workloads(db: asyncpg.Pool, workload_ids: list[str], team: str) -> list[str]:
    """Of these workloads, those that exist and belong to another team than `team` (an endpoint of
    `team` may not take them, and to the caller they do not exist)."""
    teams = await workload_store.workload_teams(db, workload_ids)
    return [w for w in workload_ids if w in teams and teams[w] != team]

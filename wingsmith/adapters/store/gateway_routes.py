"""The published route table: what every gateway replica serves, with a version it can ask about.

Written only by the endpoint.set_routes activity, before it pushes to the gateway, so a gateway that
pulls never sees a table older than one it was pushed. Publishing the same routes twice changes
nothing (a retried activity leaves the version where it was).
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from wingsmith.domain.gateway.routes import EndpointRoutes

# Serialises publishers: a version taken from the sequence commits before any larger one, so a
# reader that saw version N has seen every change up to N.
_PUBLISH_LOCK = 0x57524F55


@dataclass(frozen=True)
class PublishedRoutes:
    version: int
    routes: list[EndpointRoutes]


async def publish(pool: asyncpg.Pool, routes: EndpointRoutes) -> int:
    """Make the table hold `routes` for its endpoint (no backends: the endpoint leaves the table).
    Returns the table's version afterwards."""
    value = routes.model_dump(mode="json") if routes.backends else None
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("select pg_advisory_xact_lock($1)", _PUBLISH_LOCK)
        current = await conn.fetchrow("select routes from gateway_routes where model_name = $1", routes.model_name)
        if current is None and value is None:
            return await _version(conn)
        if current is None or current["routes"] != value:
            await conn.execute(
                """insert into gateway_routes (model_name, routes, version)
                   values ($1, $2, nextval('gateway_routes_version'))
                   on conflict (model_name) do update set routes = excluded.routes, version = excluded.version,
                       updated_at = now()""", routes.model_name, value)
        return await _version(conn)


async def published_version(pool: asyncpg.Pool) -> int:
    return await _version(pool)


async def published(pool: asyncpg.Pool) -> PublishedRoutes:
    """The whole table, in one snapshot with its version."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        rows = await conn.fetch("select routes from gateway_routes where routes is not null order by model_name")
        return PublishedRoutes(version=await _version(conn),
                               routes=[EndpointRoutes.model_validate(r["routes"]) for r in rows])


async def _version(conn: asyncpg.Pool | asyncpg.Connection | PoolConnectionProxy) -> int:
    return int(await conn.fetchval("select coalesce(max(version), 0) from gateway_routes"))

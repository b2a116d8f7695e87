"""Postgres access: a pool with JSON codecs, and the versioned migrations applied at start."""

from __future__ import annotations

import asyncio
import json
import time
from importlib import resources

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from wingsmith.adapters.startup import postgres_failure

# Any number works as long as every Wingsmith process uses the same one: it serialises migrations
# when several processes start at once.
_MIGRATION_LOCK = 0x57494E47


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(typ, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def open_pool(dsn: str, *, min_size: int = 1, max_size: int = 10, wait_seconds: float = 0) -> asyncpg.Pool:
    """`wait_seconds` > 0: keep trying that long while the server refuses or is starting up, so a
    process (re)started during a Postgres restart waits for it instead of crashing."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, init=_init_connection,
                                             command_timeout=30)
        except (OSError, asyncpg.CannotConnectNowError, asyncpg.ConnectionDoesNotExistError) as exc:
            # A DSN that cannot work (sslmode=require on a server without TLS, a missing sslrootcert)
            # fails the same way every time: say so at once rather than after the whole wait.
            if time.monotonic() >= deadline or postgres_failure(exc).misconfigured:
                raise
            await asyncio.sleep(0.5)


def migration_files() -> list[tuple[str, str]]:
    folder = resources.files("wingsmith.adapters.store") / "migrations"
    return sorted((f.name, f.read_text()) for f in folder.iterdir() if f.name.endswith(".sql"))


async def migrate(pool_or_conn: asyncpg.Pool | asyncpg.Connection) -> list[str]:
    """Apply the migrations not yet recorded in `schema_migrations`; returns those applied now."""
    applied_now = []
    async with _acquire(pool_or_conn) as conn:
        async with conn.transaction():
            await conn.execute("select pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute("create table if not exists schema_migrations ("
                               " name text primary key, applied_at timestamptz not null default now())")
            done = {r["name"] for r in await conn.fetch("select name from schema_migrations")}
            for name, sql in migration_files():
                if name in done:
                    continue
                await conn.execute(sql)
                await conn.execute("insert into schema_migrations (name) values ($1)", name)
                applied_now.append(name)
    return applied_now


class _acquire:
    def __init__(self, pool_or_conn: asyncpg.Pool | asyncpg.Connection) -> None:
        self._src = pool_or_conn
        self._conn: PoolConnectionProxy | None = None

    async def __aenter__(self) -> asyncpg.Connection | PoolConnectionProxy:
        if isinstance(self._src, asyncpg.Pool):
            self._conn = await self._src.acquire()
            return self._conn
        return self._src

    async def __aexit__(self, *exc: object) -> None:
        if self._conn is not None and isinstance(self._src, asyncpg.Pool):
            await self._src.release(self._conn)

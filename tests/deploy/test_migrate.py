"""Pods of every Deployment run `python -m wingsmith.adapters.store migrate` as an init container, so several
migrate one database at the same moment: each migration must be applied exactly once and every
migrator must succeed. Against the real test Postgres, on a fresh database each."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import asyncpg

from tests.conftest import empty_database
from wingsmith.adapters.store.db import migrate, migration_files

ROOT = Path(__file__).resolve().parents[2]
MIGRATORS = 4


async def _recorded(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return [r["name"] for r in await conn.fetch("select name from schema_migrations order by name")]
    finally:
        await conn.close()


async def _migrate_together(dsn: str, count: int) -> list[list[str] | BaseException]:
    conns = [await asyncpg.connect(dsn) for _ in range(count)]
    try:
        return await asyncio.gather(*(migrate(c) for c in conns), return_exceptions=True)
    finally:
        for c in conns:
            await c.close()


async def test_concurrent_migrators_apply_each_migration_once(pg_server):
    dsn = await empty_database(pg_server)
    results = await _migrate_together(dsn, MIGRATORS)
    assert not [r for r in results if isinstance(r, BaseException)]
    applied = [name for r in results for name in r]  # type: ignore[union-attr]
    every = [name for name, _ in migration_files()]
    assert sorted(applied) == every  # each once, by whichever migrator got the lock first
    assert await _recorded(dsn) == every


async def test_without_the_lock_concurrent_migrators_collide(pg_server):
    """The check above can fail: the same migrators, their lock statement made a no-op, collide."""
    dsn = await empty_database(pg_server)
    conns = [_Unlocked(await asyncpg.connect(dsn)) for _ in range(MIGRATORS)]
    try:
        results = await asyncio.gather(*(migrate(c) for c in conns), return_exceptions=True)  # type: ignore[arg-type]
    finally:
        for c in conns:
            await c.conn.close()
    assert [r for r in results if isinstance(r, asyncpg.PostgresError)]


class _Unlocked:
    """A connection on which taking the migration lock does nothing."""

    def __init__(self, conn: asyncpg.Connection):
        self.conn = conn

    async def execute(self, query: str, *args):
        if "pg_advisory" in query:
            return None
        return await self.conn.execute(query, *args)

    def __getattr__(self, name: str):
        return getattr(self.conn, name)


def test_the_init_containers_command_migrates_from_several_processes_at_once(pg_server, tmp_path):
    dsn = asyncio.run(empty_database(pg_server))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_")}
    env.update(DATABASE_URL=dsn, WINGSMITH_HOME=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-m", "wingsmith.adapters.store", "migrate", "--wait", "30"],
                              cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(MIGRATORS)]
    try:
        outcomes = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * MIGRATORS, outcomes
    assert sum("applied" in out for out, _ in outcomes) == 1, outcomes
    assert asyncio.run(_recorded(dsn)) == [name for name, _ in migration_files()]


def test_migrate_without_database_url_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_") and k != "DATABASE_URL"}
    env["WINGSMITH_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "wingsmith.adapters.store", "migrate"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == "migrate: DATABASE_URL is not set"

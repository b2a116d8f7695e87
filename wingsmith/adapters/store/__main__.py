"""`python -m wingsmith.adapters.store migrate`: apply the registry's migrations and exit.

The Kubernetes manifests run it as an init container of every Deployment that uses Postgres, so
any number of pods may start at once: `migrate` serialises them with an advisory lock, the first
applies what is missing and the others find nothing left to do. The exit code says whether the
schema is current (0) or not (1), in one line naming the cause and never the DSN (it may hold a
password)."""

from __future__ import annotations

import argparse
import asyncio
import sys

import asyncpg

from wingsmith.adapters.store.db import migrate, open_pool
from wingsmith.domain.config import get_settings

# A pod started while Postgres restarts (or before its Service answers) waits this long rather than
# failing and being restarted with Kubernetes' back-off.
WAIT_SECONDS = 120.0


async def _migrate(dsn: str, wait_seconds: float) -> list[str]:
    pool = await open_pool(dsn, max_size=1, wait_seconds=wait_seconds)
    try:
        return await migrate(pool)
    finally:
        await pool.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wingsmith.adapters.store", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    m = sub.add_parser("migrate", help="apply the registry's migrations (DATABASE_URL); safe to run concurrently")
    m.add_argument("--wait", type=float, default=WAIT_SECONDS, metavar="SECONDS",
                   help=f"how long to wait for Postgres to accept connections (default {WAIT_SECONDS:g})")
    args = parser.parse_args(argv)
    dsn = get_settings().database_url
    if not dsn:
        print("migrate: DATABASE_URL is not set", file=sys.stderr)
        return 1
    try:
        applied = asyncio.run(_migrate(dsn, args.wait))
    except ValueError:  # asyncpg's DSN parser: its message may quote the URL, password included
        print("migrate: DATABASE_URL is not a valid postgresql:// URL", file=sys.stderr)
        return 1
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        print(f"migrate: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"migrate: applied {', '.join(applied)}" if applied else "migrate: the schema is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())

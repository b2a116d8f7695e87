"""The registry (PostgreSQL) as activities reach it: one pool per worker, handed in at start."""

from __future__ import annotations

import asyncpg
from temporalio.exceptions import ApplicationError


def registry_pool(db: asyncpg.Pool | None) -> asyncpg.Pool:
    """The worker's pool; a worker started without DATABASE_URL says so instead of failing on None."""
    if db is None:
        raise ApplicationError("the worker has no database configured (DATABASE_URL)", type="NoDatabase")
    return db

"""What route handlers need from the running app, as FastAPI dependencies (`async def`: they do no I/O,
and FastAPI would run a plain `def` in its thread pool, a thread hop per request)."""

from __future__ import annotations

from typing import Annotated

import asyncpg
from fastapi import Depends, Request
from temporalio.client import Client

from api.errors import ApiError
from wingsmith.config import Settings


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _db(request: Request) -> asyncpg.Pool:
    pool = getattr(request.app.state, "db", None)
    if pool is None:
        raise ApiError(503, "the registry database is not reachable")
    return pool


async def _temporal(request: Request) -> Client:
    client = getattr(request.app.state, "temporal", None)
    if client is None:
        raise ApiError(503, "Temporal is not reachable")
    return client


SettingsDep = Annotated[Settings, Depends(_settings)]
DbDep = Annotated[asyncpg.Pool, Depends(_db)]
TemporalDep = Annotated[Client, Depends(_temporal)]

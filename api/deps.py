"""What route handlers need from the running app, as FastAPI dependencies."""

from __future__ import annotations

from typing import Annotated

import asyncpg
from fastapi import Depends, Request
from temporalio.client import Client

from api.errors import ApiError
from wingsmith.config import Settings


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _db(request: Request) -> asyncpg.Pool:
    pool = getattr(request.app.state, "db", None)
    if pool is None:
        raise ApiError(503, "the registry database is not reachable")
    return pool


def _temporal(request: Request) -> Client:
    client = getattr(request.app.state, "temporal", None)
    if client is None:
        raise ApiError(503, "Temporal is not reachable")
    return client


SettingsDep = Annotated[Settings, Depends(_settings)]
DbDep = Annotated[asyncpg.Pool, Depends(_db)]
TemporalDep = Annotated[Client, Depends(_temporal)]

"""The console's test bed: the artifact journey's fixtures (offline Hub, real Temporal and Postgres,
the worker's own wiring), plus a console client that signs in through the login form."""

from __future__ import annotations

import json
import re

import httpx
import pytest
import pytest_asyncio

from api.app import create_app
from api.auth import TokenTable
from tests.artifacts.conftest import KIMI, TOKENS, as_, deps, hub, settings  # noqa: F401 - fixtures
from wingsmith.domain.config import Settings

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, "the page carries no CSRF field"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, token: str, next_url: str = "/console") -> httpx.Response:
    page = await client.get("/console/login")
    return await client.post("/console/login", data={"token": token, "next": next_url, "csrf": csrf_of(page.text)})


@pytest.fixture
def offline_app():
    """The app with no database and no Temporal: what the public pages need (nothing)."""
    s = Settings(auth_tokens=json.dumps(TOKENS), log_format="json")
    return create_app(s, tokens=TokenTable.from_json(s.auth_tokens))


@pytest_asyncio.fixture(loop_scope="session")
async def anon(offline_app):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=offline_app), base_url="http://plane") as client:
        yield client


@pytest_asyncio.fixture(loop_scope="session")
async def plane(settings, pg_pool, temporal_client):  # noqa: F811
    return create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool,
                      temporal=temporal_client)


def browser_for(app) -> httpx.AsyncClient:
    """A client with its own cookie jar, like one person's browser."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://plane")


__all__ = ["KIMI", "as_", "browser_for", "csrf_of", "sign_in"]

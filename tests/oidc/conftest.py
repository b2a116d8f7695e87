"""Single sign-on's test bed: the tests' own issuer (tests/oidc/issuer.py) and the API app trusting it."""

from __future__ import annotations

import json

import httpx
import pytest
import pytest_asyncio

from api.app import create_app
from tests.artifacts.conftest import TOKENS
from tests.oidc.issuer import AUDIENCE, Issuer
from wingsmith.domain.config import Settings


@pytest.fixture
def issuer():
    it = Issuer()
    yield it
    it.stop()


def sso_settings(issuer: Issuer, **overrides) -> Settings:
    """Discovery finds the JWKS (no URL set), unless a test sets one."""
    return Settings(**{"auth_tokens": json.dumps(TOKENS), "log_format": "json", "oidc_issuer": issuer.url,
                       "oidc_audience": AUDIENCE, **overrides})


@pytest_asyncio.fixture(loop_scope="session")
async def offline_api(issuer):
    """The app with no database and no Temporal: enough for routes that read only the catalog."""
    app = create_app(sso_settings(issuer))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        client.app = app  # type: ignore[attr-defined]
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}

"""The sign-in page names where this plane's local tokens really are (`$WINGSMITH_HOME/tokens.json`,
whatever the home), and no path at all when the plane reads a team's token table."""

from __future__ import annotations

import json

import httpx
import pytest

from api.app import create_app
from api.auth import TokenTable
from wingsmith.domain.config import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")
TOKENS = {"tok-vic": {"name": "vic", "roles": ["viewer"]}}


async def _login_page(settings: Settings) -> str:
    app = create_app(settings, tokens=TokenTable.from_json(json.dumps(TOKENS)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://plane") as client:
        page = await client.get("/console/login")
        assert page.status_code == 200
        return page.text


async def test_the_page_names_the_home_in_use(tmp_path):
    home = tmp_path / "team-home"
    text = await _login_page(Settings(home=home, log_format="json"))
    assert str(home / "tokens.json") in text and ".wingsmith/tokens.json" not in text


async def test_a_token_table_plane_names_no_file(tmp_path):
    text = await _login_page(Settings(home=tmp_path, auth_tokens=json.dumps(TOKENS), log_format="json"))
    assert "tokens.json" not in text and "WINGSMITH_AUTH_TOKENS" in text

"""The console signs in with the same OIDC tokens as the API: pasted once, kept in the session cookie,
and refused with the token's own reason (never the token)."""

from __future__ import annotations

import asyncio
import time

from api.app import create_app
from tests.console.conftest import browser_for, sign_in
from tests.oidc.conftest import sso_settings


async def test_console_signs_in_with_an_sso_token(issuer):
    app = create_app(sso_settings(issuer))
    token = issuer.token("rita", ["approver", "platform-admin"], key=issuer.ec)
    async with browser_for(app) as browser:
        r = await sign_in(browser, token, next_url="/console/models")
        assert r.status_code == 303 and r.headers["location"] == "/console/models", r.text
        page = await browser.get("/console/models")
        assert "Signed in as <strong>rita</strong> (approver)" in page.text
        # A page behind sign-in lets it through (this app has no database, so it answers 503, not a redirect).
        assert (await browser.get("/console")).status_code == 503


async def test_console_refuses_bad_sso_tokens_with_their_reason(issuer):
    app = create_app(sso_settings(issuer))
    now = int(time.time())
    cases = [(issuer.token("rita", ["viewer"], exp=now - 600, iat=now - 900, nbf=now - 900), 401,
              "Token refused: the token has expired."),
             (issuer.token("rita", ["viewer"], aud="another-app"), 401, "meant for another audience"),
             (issuer.token("rita", ["nothing-here"]), 403, "holds none of this plane&#39;s roles"),
             (issuer.token("rita", ["viewer"], groups=["g" * 60] * 70), 422, "a browser keeps at most")]
    async with browser_for(app) as browser:
        for token, status, says in cases:
            r = await sign_in(browser, token)
            assert r.status_code == status and says in r.text, r.text
            assert "wingsmith_token" not in r.headers.get("set-cookie", "")
            assert all(part not in r.text for part in token.split(".")), "a token is never echoed back"


async def test_an_expired_session_token_asks_to_sign_in_again(issuer):
    app = create_app(sso_settings(issuer, oidc_leeway_seconds=0))
    async with browser_for(app) as browser:
        r = await sign_in(browser, issuer.token("rita", ["viewer"], exp=int(time.time()) + 2))
        assert r.status_code == 303
        assert "Signed in as <strong>rita</strong>" in (await browser.get("/console/models")).text
        await asyncio.sleep(3)
        assert "Signed in as" not in (await browser.get("/console/models")).text
        again = await browser.get("/console")
        assert again.status_code == 303 and again.headers["location"].startswith("/console/login")

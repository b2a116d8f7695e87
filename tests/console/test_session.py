"""Signing in and out: the token becomes an HttpOnly, SameSite=Strict cookie; forms need the CSRF token."""

from __future__ import annotations

from tests.console.conftest import browser_for, csrf_of, sign_in


async def test_pages_behind_sign_in_redirect_to_the_login_page(anon):
    for path, target in [("/console", "%2Fconsole"),
                         ("/console?state=draft", "%2Fconsole%3Fstate%3Ddraft"),
                         ("/console/artifacts/moonshotai/Kimi-K3@abc",
                          "%2Fconsole%2Fartifacts%2Fmoonshotai%2FKimi-K3%40abc")]:
        r = await anon.get(path)
        assert r.status_code == 303 and r.headers["location"] == f"/console/login?next={target}", path
    # The API's JSON routes still answer in JSON.
    api = await anon.get("/v1/artifacts")
    assert api.status_code == 401 and api.json()["error"]["code"] == "unauthenticated"


async def test_sign_in_sets_a_strict_http_only_cookie_and_goes_next(offline_app):
    async with browser_for(offline_app) as client:
        r = await sign_in(client, "tok-ana", next_url="/console/models")
        assert r.status_code == 303 and r.headers["location"] == "/console/models"
        cookies = [v for k, v in r.headers.multi_items() if k == "set-cookie"]
        token_cookies = [c for c in cookies if c.startswith("wingsmith_token=")]
        # The console's pages, and the payload codec the Temporal UI calls: nowhere else.
        assert sorted(c.lower().split("path=")[1].split(";")[0] for c in token_cookies) == ["/codec", "/console"]
        for token_cookie in token_cookies:
            assert "tok-ana" in token_cookie
            for attribute in ("HttpOnly", "SameSite=strict"):
                assert attribute.lower() in token_cookie.lower()
        page = await client.get("/console/models")
        assert "Signed in as <strong>ana</strong> (approver)" in page.text


async def test_sign_in_refuses_unknown_tokens_and_foreign_targets(offline_app):
    async with browser_for(offline_app) as client:
        bad = await sign_in(client, "not-a-token")
        assert bad.status_code == 401 and "That token is not known to this plane" in bad.text
        assert "not-a-token" not in bad.text, "a token is never echoed back"
        assert "wingsmith_token" not in bad.headers.get("set-cookie", "")
        empty = await sign_in(client, "")
        assert empty.status_code == 422 and "Paste your API token" in empty.text
        away = await sign_in(client, "tok-vic", next_url="https://elsewhere.example/steal")
        assert away.status_code == 303 and away.headers["location"] == "/console"
        twice = await sign_in(client, "tok-vic", next_url="//elsewhere.example")
        assert twice.headers["location"] == "/console"


async def test_forms_without_the_sessions_csrf_token_are_refused(offline_app):
    async with browser_for(offline_app) as client:
        missing = await client.post("/console/login", data={"token": "tok-ana"})
        assert missing.status_code == 403 and "did not come from this console" in missing.text
        assert "wingsmith_token" not in missing.headers.get("set-cookie", "")

        page = await client.get("/console/login")
        wrong = await client.post("/console/login", data={"token": "tok-ana", "csrf": csrf_of(page.text) + "x"})
        assert wrong.status_code == 403

        foreign = await client.post("/console/login", data={"token": "tok-ana", "csrf": csrf_of(page.text)},
                                    headers={"Origin": "https://attacker.example"})
        assert foreign.status_code == 403 and "another site" in foreign.text


async def test_sign_out_clears_the_session(offline_app):
    async with browser_for(offline_app) as client:
        await sign_in(client, "tok-vic")
        page = await client.get("/console/models")
        assert "Signed in as <strong>vic</strong>" in page.text
        no_csrf = await client.post("/console/logout", data={})
        assert no_csrf.status_code == 403
        out = await client.post("/console/logout", data={"csrf": csrf_of(page.text)})
        assert out.status_code == 303 and out.headers["location"] == "/console/login?signed_out=1"
        assert (await client.get("/console")).status_code == 303
        assert "You are signed out" in (await client.get(out.headers["location"])).text

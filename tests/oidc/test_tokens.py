"""OIDC tokens through the real API app, against the tests' own issuer over real HTTP: what passes, what
is refused (401 in the one error shape, never echoing the token), and how the issuer's keys are fetched."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import jwt
import pytest

from api.app import create_app
from api.auth import principal_for
from tests.oidc.conftest import bearer, sso_settings
from tests.oidc.issuer import SigningKey, hmac_signed, unsigned

ROUTE = "/v1/recipes"  # a viewer's route that needs neither database nor Temporal


def app_client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


def assert_refused(response: httpx.Response, token: str, reason: str, status: int = 401) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == ("unauthenticated" if status == 401 else "forbidden"), error
    assert reason in error["message"], error
    for part in token.split("."):  # no piece of the token comes back
        assert len(part) < 8 or part not in response.text
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")


async def test_rsa_and_ec_tokens_sign_in(issuer, offline_api):
    for key in (issuer.rsa, issuer.ec):
        r = await offline_api.get(ROUTE, headers=bearer(issuer.token("rita", ["viewer"], key=key)))
        assert r.status_code == 200, r.text
    # The static table works beside it, and a token that is neither gets the table's answer.
    assert (await offline_api.get(ROUTE, headers=bearer("tok-vic"))).status_code == 200
    assert_refused(await offline_api.get(ROUTE, headers=bearer("not-a-jwt")), "not-a-jwt", "unknown token")


async def test_bad_tokens_get_401(issuer, offline_api):
    now = int(time.time())
    impostor = SigningKey("RSA", kid=issuer.rsa.kid)  # same kid, another key: a forgery
    good = issuer.claims("mallory", ["admin"])
    header = {"typ": "JWT", "kid": issuer.rsa.kid}
    cases = {
        "forged": (issuer.token("mallory", ["admin"], key=impostor), "signature does not verify"),
        "expired": (issuer.token("mallory", ["admin"], exp=now - 120, iat=now - 900, nbf=now - 900), "expired"),
        "not yet valid": (issuer.token("mallory", ["admin"], nbf=now + 600), "not valid yet"),
        "issued in the future": (issuer.token("mallory", ["admin"], iat=now + 600), "not valid yet"),
        "wrong issuer": (issuer.token("mallory", ["admin"], iss="https://evil.example"), "not issued by"),
        "wrong audience": (issuer.token("mallory", ["admin"], aud="another-app"), "another audience"),
        "alg none": (unsigned(good, {**header, "alg": "none"}), "algorithm is not one this plane accepts"),
        "HS256 keyed with the public key (PEM)": (
            hmac_signed(good, {**header, "alg": "HS256"}, issuer.rsa.public_pem()), "algorithm is not one"),
        "HS256 keyed with the public JWK": (
            hmac_signed(good, {**header, "alg": "HS256"}, json.dumps(issuer.rsa.jwk).encode()),
            "algorithm is not one"),
        "RSA key claimed as ES256": (hmac_signed(good, {**header, "alg": "ES256"}, b"x"), "algorithm is not the one"),
        "garbage after the header": (issuer.token("mallory", ["admin"])[:-10] + "AAAAAAAAAA", "signature"),
    }
    cases["no expiry"] = (_sign(issuer, {k: v for k, v in good.items() if k != "exp"}), "no exp claim")
    cases["no subject"] = (_sign(issuer, {k: v for k, v in good.items() if k != "sub"}), "no sub claim")
    for what, (token, reason) in cases.items():
        r = await offline_api.get(ROUTE, headers=bearer(token))
        assert r.status_code == 401, (what, r.text)
        assert_refused(r, token, reason)


def _sign(issuer, claims) -> str:
    return jwt.encode(claims, issuer.rsa.private, algorithm="RS256", headers={"kid": issuer.rsa.kid})


async def test_roles_and_team_come_from_claims(issuer):
    app = create_app(sso_settings(issuer, oidc_roles_claim="realm_access.roles", oidc_team_claim="groups"))
    async with app_client(app) as api:
        ok = issuer.token("kira", [], realm_access={"roles": ["offline_access", "viewer", "superuser"]},
                          groups=["ml"])
        assert (await api.get(ROUTE, headers=bearer(ok))).status_code == 200
        principal = await principal_for(app, ok)
        assert principal.name == "kira" and principal.roles == {"viewer"} and principal.team == "ml"

        none = issuer.token("kira", [], realm_access={"roles": ["offline_access", "superuser"]})
        assert_refused(await api.get(ROUTE, headers=bearer(none)), none, "holds none of this plane's roles",
                       status=403)
        bad_team = issuer.token("kira", [], realm_access={"roles": ["viewer"]}, groups=["ML Platform"])
        assert_refused(await api.get(ROUTE, headers=bearer(bad_team)), bad_team, "groups claim is not a team",
                       status=403)
        two_teams = issuer.token("kira", [], realm_access={"roles": ["viewer"]}, groups=["a", "b"])
        assert_refused(await api.get(ROUTE, headers=bearer(two_teams)), two_teams, "not one team name")


async def test_name_falls_back_to_sub_and_team_to_default(issuer, offline_api):
    claims = issuer.claims("x", ["operator"])
    del claims["preferred_username"]
    principal = await principal_for(offline_api.app, _sign(issuer, claims))
    assert principal.name == "sub-x" and principal.team == "default" and principal.roles == {"operator"}
    bad = issuer.claims("x", ["viewer"], preferred_username="a\u0000b")
    token = _sign(issuer, bad)
    assert_refused(await offline_api.get(ROUTE, headers=bearer(token)), token, "not a usable name")


async def test_unknown_kid_refetches_once_and_a_flood_is_rate_limited(issuer):
    INTERVAL = 2.0  # noqa: N806 - a constant of this test
    app = create_app(sso_settings(issuer, oidc_jwks_min_refresh_seconds=INTERVAL))
    async with app_client(app) as api:
        assert (await api.get(ROUTE, headers=bearer(issuer.token("rita", ["viewer"])))).status_code == 200
        assert issuer.jwks_fetches == 1
        for _ in range(3):  # known keys: no fetch
            assert (await api.get(ROUTE, headers=bearer(issuer.token("rita", ["viewer"])))).status_code == 200
        assert issuer.jwks_fetches == 1

        # The issuer rotates: a new key appears, the old one goes.
        rotated = SigningKey("RSA")
        tokens = [issuer.token("rita", ["viewer"], key=rotated) for _ in range(20)]
        flood = [issuer.token("eve", ["viewer"], key=rotated, headers={"kid": f"random-{i}"}) for i in range(200)]
        await asyncio.sleep(INTERVAL + 0.1)
        issuer.keys = [rotated, issuer.ec]
        answers = await asyncio.gather(*(api.get(ROUTE, headers=bearer(t)) for t in tokens))
        rotated_at = time.monotonic()
        assert [r.status_code for r in answers] == [200] * 20
        assert issuer.jwks_fetches == 2, "concurrent requests with a new kid share one fetch"

        # A flood of made-up kids: at most one fetch per refresh interval, however many requests. (The
        # interval counts from the last fetch's start, which may lie up to one interval before the flood.)
        answers = await asyncio.gather(*(api.get(ROUTE, headers=bearer(t)) for t in flood))
        elapsed = time.monotonic() - rotated_at
        assert all(r.status_code == 401 and "does not publish" in r.json()["error"]["message"] for r in answers)
        assert issuer.jwks_fetches - 2 <= 1 + int(elapsed / INTERVAL), (issuer.jwks_fetches, elapsed)


async def test_issuer_unreachable_is_503_without_its_address(issuer):
    issuer.down = True
    app = create_app(sso_settings(issuer))
    async with app_client(app) as api:
        token = issuer.token("rita", ["viewer"])
        r = await api.get(ROUTE, headers=bearer(token))
        assert r.status_code == 503 and r.json()["error"]["code"] == "unavailable", r.text
        assert "127.0.0.1" not in r.text and token not in r.text
        # Within the refresh interval nothing is fetched again: the plane does not hammer a sick issuer.
        issuer.down = False
        assert (await api.get(ROUTE, headers=bearer(token))).status_code == 503
    app = create_app(sso_settings(issuer, oidc_jwks_min_refresh_seconds=0))
    async with app_client(app) as api:
        assert (await api.get(ROUTE, headers=bearer(token))).status_code == 200


@pytest.mark.parametrize("document", [
    b"x" * (300 * 1024),                                     # larger than any JWKS
    b"[1, 2, 3]",                                            # not a JWKS
    json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "k"}]}).encode(),  # only a symmetric key
])
async def test_a_bad_jwks_is_refused(issuer, document):
    issuer.jwks_override = document
    app = create_app(sso_settings(issuer, oidc_jwks_url=issuer.url + "/jwks.json"))
    async with app_client(app) as api:
        r = await api.get(ROUTE, headers=bearer(issuer.token("rita", ["viewer"])))
        assert r.status_code == 503, r.text


async def test_discovery_must_name_the_issuer(issuer):
    # Configured with a trailing slash, the issuer no longer equals what discovery names (nor `iss`).
    app = create_app(sso_settings(issuer, oidc_issuer=issuer.url + "/"))
    async with app_client(app) as api:
        r = await api.get(ROUTE, headers=bearer(issuer.token("rita", ["viewer"])))
        assert r.status_code == 503, r.text
        assert issuer.jwks_fetches == 0


@pytest.mark.parametrize(("overrides", "says"), [
    ({"oidc_algorithms": "RS256,HS256"}, "only asymmetric"),
    ({"oidc_algorithms": "none"}, "only asymmetric"),
    ({"oidc_audience": None}, "WINGSMITH_OIDC_AUDIENCE must be set"),
    ({"oidc_issuer": "http://idp.example.com"}, "https://"),
    ({"oidc_jwks_url": "http://idp.example.com/keys"}, "https://"),
])
def test_unsafe_settings_stop_the_app(issuer, overrides, says):
    with pytest.raises(ValueError, match=says):
        create_app(sso_settings(issuer, **overrides))

"""The issuer's keys against a broken or hostile issuer (the tests' own, over real HTTP): a malformed
key is skipped and never replaces a good one, a deeply nested document is refused (not a 500), and a
slow issuer holds no request past the fetch's deadline. In each case the last good keys keep working."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import time

import httpx
import structlog

from api.app import create_app
from tests.oidc.conftest import bearer, sso_settings
from tests.oidc.issuer import Issuer, SigningKey

ROUTE = "/v1/recipes"  # a viewer's route that needs neither database nor Temporal


def _client(issuer: Issuer, **overrides) -> httpx.AsyncClient:
    # Refetch at every unknown kid, so each test's hostile document is fetched when the test says.
    app = create_app(sso_settings(issuer, oidc_jwks_url=issuer.url + "/jwks.json", oidc_jwks_min_refresh_seconds=0,
                                  **overrides))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


async def _status(api: httpx.AsyncClient, token: str) -> int:
    return (await api.get(ROUTE, headers=bearer(token))).status_code


def _unknown_kid(issuer: Issuer) -> str:
    """A token whose kid the issuer does not publish: it makes the plane refetch the keys."""
    return issuer.token("eve", ["viewer"], key=SigningKey("RSA"))


async def test_a_malformed_key_is_skipped_and_never_replaces_a_good_one(issuer):
    async with _client(issuer) as api:
        good = issuer.token("rita", ["viewer"])
        assert await _status(api, good) == 200 and issuer.jwks_fetches == 1

        # The issuer now publishes its RSA key broken (same kid), its EC key intact, and a new key broken.
        broken = {**issuer.rsa.jwk, "n": "AQAB"}
        newcomer = {**copy.deepcopy(issuer.ec.jwk), "kid": "new-but-broken", "x": "AA"}
        issuer.jwks_override = json.dumps({"keys": [broken, issuer.ec.jwk, newcomer]}).encode()
        with structlog.testing.capture_logs() as logs:
            assert await _status(api, _unknown_kid(issuer)) == 401
        assert issuer.jwks_fetches == 2
        assert await _status(api, good) == 200, "the broken entry replaced the good RSA key"
        skipped = [e for e in logs if e["event"] == "oidc key skipped"]
        assert {e["kid"] for e in skipped} == {issuer.rsa.kid, "new-but-broken"}, logs
        assert all("AQAB" not in json.dumps(e) for e in skipped)  # no key material in the log
        assert await _status(api, issuer.token("rita", ["viewer"], key=issuer.ec)) == 200

        # An RSA key far larger than any issuer's (each verification would cost): skipped the same way.
        huge = {**issuer.rsa.jwk, "kid": "huge", "n": base64.urlsafe_b64encode(b"\xff" * 2048).decode().rstrip("=")}
        issuer.jwks_override = json.dumps({"keys": [huge, issuer.rsa.jwk, issuer.ec.jwk]}).encode()
        with structlog.testing.capture_logs() as logs:
            assert await _status(api, _unknown_kid(issuer)) == 401
        assert [e.get("problem") for e in logs if e["event"] == "oidc key skipped"] == ["an RSA key over 8192 bits"]
        assert await _status(api, good) == 200

        # Nothing usable at all: the last good set stays.
        issuer.jwks_override = json.dumps({"keys": [broken]}).encode()
        assert await _status(api, _unknown_kid(issuer)) == 401 and issuer.jwks_fetches == 4
        assert await _status(api, good) == 200

        # A real rotation still replaces the keys: the old RSA key goes once the issuer drops it.
        issuer.jwks_override = None
        rotated = SigningKey("EC")
        issuer.keys = [rotated]
        assert await _status(api, issuer.token("rita", ["viewer"], key=rotated)) == 200
        assert await _status(api, good) == 401


def _nested(depth: int) -> bytes:
    return b'{"keys": [' + b"[" * depth + b"]" * depth + b"]}"


async def test_a_deeply_nested_jwks_is_refused_not_a_500(issuer):
    deep = _nested(60_000)  # 120 KB: under the size cap, far past any real document's depth (4)
    assert len(deep) < 256 * 1024
    issuer.jwks_override = deep
    async with _client(issuer) as api:
        r = await api.get(ROUTE, headers=bearer(issuer.token("rita", ["viewer"])))
        assert r.status_code == 503 and r.json()["error"]["code"] == "unavailable", r.text

    issuer.jwks_override = None
    async with _client(issuer) as api:
        good = issuer.token("rita", ["viewer"])
        assert await _status(api, good) == 200
        # Nested inside a key, or in strings that only look like brackets: the same rule, no 500.
        deep_in_a_key = {**issuer.ec.jwk, "x5c": json.loads(_nested(40))["keys"]}
        issuer.jwks_override = json.dumps({"keys": [deep_in_a_key]}).encode()
        assert await _status(api, _unknown_kid(issuer)) == 401
        assert await _status(api, good) == 200  # the last good keys stay
        issuer.jwks_override = json.dumps({"keys": [{**k.jwk, "note": "[[[[{{{{" * 50} for k in issuer.keys]}).encode()
        assert await _status(api, _unknown_kid(issuer)) == 401
        assert await _status(api, issuer.token("rita", ["viewer"], key=issuer.ec)) == 200


async def test_a_slow_issuer_holds_no_request_past_the_fetch_deadline(issuer):
    deadline = 1.5  # WINGSMITH_OIDC_HTTP_TIMEOUT_SECONDS: the whole fetch, not each read
    async with _client(issuer, oidc_http_timeout_seconds=deadline) as api:
        good = issuer.token("rita", ["viewer"])
        assert await _status(api, good) == 200

        # One byte every half second: every read gets data well within the deadline, yet the whole
        # document (over a kilobyte) would take many minutes.
        issuer.jwks_drip_seconds = 0.5
        started = time.monotonic()
        unknown = asyncio.ensure_future(_status(api, _unknown_kid(issuer)))
        await asyncio.sleep(0.2)
        # Meanwhile known keys answer at once: the fetch holds only the requests that need it.
        quick = time.monotonic()
        assert await _status(api, good) == 200 and time.monotonic() - quick < 0.5
        status = await asyncio.wait_for(unknown, timeout=10)
        held = time.monotonic() - started
        assert status == 401 and held < deadline + 1.0, (status, held)
        assert await _status(api, good) == 200  # the last good keys stay


def test_depth_is_counted_outside_strings_only():
    from wingsmith.domain.json_bounds import JsonRefused, depth_of, loads_bounded
    assert depth_of(b'{"keys": [{"x5c": ["a"]}]}') == 4
    assert depth_of(json.dumps({"a": '"[[[{{{', "b": "\\\"[[", "c": "\\\\"}).encode()) == 1
    assert depth_of(json.dumps([["\\"], ["]]]]"], [[["x"]]]]).encode()) == 4
    assert loads_bounded(b"[[1]]", max_depth=2) == [[1]]
    for bad, says in ((b"[[[1]]]", "nested 3 deep; at most 2"), (b"{nope", "not JSON")):
        try:
            loads_bounded(bad, max_depth=2)
        except JsonRefused as exc:
            assert says in str(exc)
        else:
            raise AssertionError(bad)

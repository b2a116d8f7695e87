"""Single sign-on: OpenID Connect ID or access tokens (JWTs) from one issuer, beside the static token table.

A token is trusted only when all of these hold: it is signed with an asymmetric algorithm from the
allow-list (never `none`, never HMAC: the issuer's keys are public, so an HMAC "signed" with one proves
nothing); by a key the issuer publishes in its JWKS; its `iss` is the configured issuer and its `aud`
names the configured audience; it carries `exp` and `sub`, has not expired, and `nbf`/`iat` are not in
the future (each with a small leeway for clock skew). The JOSE work is PyJWT's; this module decides
what to ask of it and what the claims mean to the plane (a name, roles, a team).

The keys are fetched with httpx and cached (`KeySet`): a token naming an unknown `kid` refetches them
(the issuer rotated its keys), but never more often than `oidc_jwks_min_refresh_seconds`, and
concurrent requests share one fetch, so a flood of made-up kids cannot make the plane hammer the issuer.
A broken or hostile issuer cannot take the good keys away nor stall the plane: one fetch (discovery
and JWKS together) has a deadline over all of it, not per read, so an issuer that sends a byte just
often enough holds nobody past it; the document is bounded in size, then in depth and number of keys,
and parsed off the event loop; each key is checked before it is used, and a malformed one is skipped
(with a log line) and never replaces the good key of its `kid`; a fetch that yields nothing usable
keeps the last good keys.

Refusals (`TokenRefused`) say what was wrong and never repeat any part of the token.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
from pydantic import BaseModel

from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.logs import get_logger
from wingsmith.domain.config import Settings
from wingsmith.domain.json_bounds import JsonRefused, loads_bounded
from wingsmith.domain.roles import ROLES
from wingsmith.domain.text import MAX_NAME, unstorable_reason

log = get_logger("wingsmith.adapters.oidc")

# Only public-key signatures: with a JWKS issuer, anything symmetric would be keyed by public data.
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
# Far above any real ID or access token (a few KB); far below what would cost anything to refuse.
MAX_TOKEN_CHARS = 16 * 1024
# A JWKS or discovery document is a few KB; a bound keeps a wrong or hostile URL from filling memory.
MAX_DOCUMENT_BYTES = 256 * 1024
# Real documents nest four deep (the JWKS, its keys, a key, its x5c); json.loads recurses once per level.
MAX_JSON_DEPTH = 10
# Issuers publish a handful (current, next, previous); each key is parsed and checked.
MAX_KEYS = 100
# Issuers sign with 2048- to 4096-bit RSA; a far larger modulus only makes each verification slower.
MAX_RSA_BITS = 8192
_JWT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


class TokenRefused(Exception):
    """The token cannot be trusted; the message says why, without any part of the token."""


class KeysUnavailable(Exception):
    """The issuer's keys could not be fetched and none are cached: the plane, not the token, is at fault.
    The message names the URL; it is for the log, not for the caller."""


class Identity(BaseModel, frozen=True):
    """Who a verified token says its bearer is, in the plane's terms."""
    name: str
    subject: str
    roles: frozenset[str]  # the plane's roles only; others the issuer lists are ignored
    team: str | None       # None: the token names no team


class OidcConfig(BaseModel, frozen=True):
    issuer: str
    audience: str
    jwks_url: str | None = None
    algorithms: tuple[str, ...] = ("RS256", "PS256", "ES256", "EdDSA")
    name_claim: str = "preferred_username"
    roles_claim: str = "roles"
    team_claim: str = "team"
    leeway_seconds: int = 30

    @classmethod
    def from_settings(cls, settings: Settings) -> OidcConfig | None:
        """The settings' issuer, checked; None when single sign-on is off (no issuer set)."""
        if not settings.oidc_issuer:
            return None
        if not settings.oidc_audience:
            # Without an audience check, a token the same issuer minted for any other application works here.
            raise ValueError("WINGSMITH_OIDC_AUDIENCE must be set with WINGSMITH_OIDC_ISSUER (the client id or "
                             "API audience tokens for this plane carry in `aud`)")
        refused = sorted(set(settings.oidc_algorithms) - set(ASYMMETRIC))
        if refused or not settings.oidc_algorithms:
            raise ValueError(f"WINGSMITH_OIDC_ALGORITHMS may list only asymmetric algorithms ({', '.join(ASYMMETRIC)})"
                             + (f"; refused: {', '.join(refused)}" if refused else ""))
        check_url(settings.oidc_issuer, "WINGSMITH_OIDC_ISSUER")
        if settings.oidc_jwks_url:
            check_url(settings.oidc_jwks_url, "WINGSMITH_OIDC_JWKS_URL")
        return cls(issuer=settings.oidc_issuer, audience=settings.oidc_audience, jwks_url=settings.oidc_jwks_url,
                   algorithms=tuple(settings.oidc_algorithms), name_claim=settings.oidc_name_claim,
                   roles_claim=settings.oidc_roles_claim, team_claim=settings.oidc_team_claim,
                   leeway_seconds=settings.oidc_leeway_seconds)


def check_url(url: str, what: str) -> str:
    """Keys fetched over plain HTTP could be swapped on the way, so https only, except to this host."""
    parts = urlsplit(url)
    if parts.hostname and (parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK)):
        return url
    raise ValueError(f"{what} must be an https:// URL (plain http only to a loopback address), got {url!r}")


def looks_like_jwt(token: str) -> bool:
    return len(token) <= MAX_TOKEN_CHARS and _JWT.match(token) is not None


# --- pure verification ----------------------------------------------------------------------------

def token_header(token: str, config: OidcConfig) -> tuple[str, str | None]:
    """The token's algorithm (from the allow-list) and key id, before any key is looked up."""
    if not looks_like_jwt(token):
        raise TokenRefused("the token is not a well-formed JWT")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenRefused("the token is not a well-formed JWT") from None
    alg, kid = header.get("alg"), header.get("kid")
    if alg not in config.algorithms:
        raise TokenRefused(f"the token's signing algorithm is not one this plane accepts "
                           f"({', '.join(config.algorithms)})")
    if kid is not None and not isinstance(kid, str):
        raise TokenRefused("the token's key id (kid) is not a string")
    return alg, kid


_REFUSALS: list[tuple[type[jwt.PyJWTError], str]] = [
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet (its nbf or iat is in the future)"),
    (jwt.InvalidIssuerError, "the token was not issued by this plane's sign-in provider"),
    (jwt.InvalidAudienceError, "the token is meant for another audience"),
    (jwt.InvalidSignatureError, "the token's signature does not verify with the issuer's key"),
    (jwt.InvalidAlgorithmError, "the token's algorithm does not match its key"),
]


def decode_claims(token: str, key: jwt.PyJWK, config: OidcConfig) -> dict[str, Any]:
    """The token's claims, once signature, algorithm, issuer, audience and times all check out."""
    try:
        return jwt.decode(token, key=key, algorithms=[key.algorithm_name], audience=config.audience,
                          issuer=config.issuer, leeway=config.leeway_seconds,
                          options={"require": ["exp", "iss", "aud", "sub"], "enforce_minimum_key_length": True})
    except jwt.MissingRequiredClaimError as err:
        raise TokenRefused(f"the token has no {err.claim} claim") from None
    except jwt.PyJWTError as err:
        for kind, message in _REFUSALS:
            if isinstance(err, kind):
                if kind is jwt.InvalidAudienceError:
                    message += f" (this plane is {config.audience!r})"
                raise TokenRefused(message) from None
        raise TokenRefused("the token is not a valid JWT") from None


def claim_at(claims: dict[str, Any], path: str) -> Any:
    """A claim by name, or by a dotted path into nested objects (Keycloak's `realm_access.roles`).
    A claim whose own name has dots (Auth0's `https://example.com/roles`) is found by that name first."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def identity_of(claims: dict[str, Any], config: OidcConfig) -> Identity:
    """Name, roles and team from the configured claims. Malformed claims are refused, never guessed at."""
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject:
        raise TokenRefused("the token's sub claim is not a string")
    name = claim_at(claims, config.name_claim)
    name = subject if name is None else name
    if not isinstance(name, str) or not _usable_name(name):
        raise TokenRefused(f"the token's {config.name_claim} claim is not a usable name "
                           f"(1 to {MAX_NAME} printable characters)")
    roles = claim_at(claims, config.roles_claim)
    if isinstance(roles, str):
        roles = roles.split()  # a space-separated list, the way `scope` is written
    if roles is None:
        roles = []
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise TokenRefused(f"the token's {config.roles_claim} claim is not a list of role names")
    team = claim_at(claims, config.team_claim)
    if isinstance(team, list) and len(team) == 1:
        team = team[0]
    if team is not None and not isinstance(team, str):
        raise TokenRefused(f"the token's {config.team_claim} claim is not one team name")
    return Identity(name=name, subject=subject, roles=frozenset(roles) & frozenset(ROLES), team=team)


def _usable_name(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME and name.isprintable() and unstorable_reason(name) is None


# --- the issuer's keys ----------------------------------------------------------------------------

class KeySet:
    """The issuer's published signing keys, fetched (after discovery, when no JWKS URL is set) and cached.
    `timeout` is the deadline of one whole fetch, discovery included."""

    def __init__(self, config: OidcConfig, *, timeout: float = 5, min_refresh_seconds: float = 60,
                 cache_seconds: float = 3600, clock: Callable[[], float] = time.monotonic):
        self._config = config
        self._jwks_url = config.jwks_url
        self._timeout = timeout
        self._min_refresh = min_refresh_seconds
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._lock = asyncio.Lock()
        self._keys: list[dict[str, Any]] = []
        self._prepared: dict[tuple[int, str], jwt.PyJWK] = {}
        self._fetched_at: float | None = None  # last fetch that gave keys
        self._tried_at: float | None = None    # last attempt, whatever came of it
        self.fetches = 0                       # JWKS documents fetched, for the log and the tests

    async def key(self, kid: str | None, alg: str) -> jwt.PyJWK:
        """The published key `kid` names, prepared for `alg`; refetched once (rate-limited) if unknown."""
        if self._stale():
            await self._refresh(self._stale)
        if self._find(kid) is None:
            await self._refresh(lambda: self._find(kid) is None and self._may_refresh())
        if self._fetched_at is None:
            raise KeysUnavailable("the issuer's keys have not been fetched yet")
        found = self._find(kid)
        if found is None:
            raise TokenRefused("the token was signed with a key the issuer does not publish" if kid is not None
                               else "the token names no key (kid) and the issuer publishes several")
        return self._prepare(found, alg)

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        if kid is None:
            return self._keys[0] if len(self._keys) == 1 else None
        return next((k for k in self._keys if k.get("kid") == kid), None)

    def _prepare(self, jwk: dict[str, Any], alg: str) -> jwt.PyJWK:
        if jwk.get("alg") not in (None, alg):
            raise TokenRefused("the token's algorithm is not the one its key is published for")
        memo = (id(jwk), alg)
        if memo not in self._prepared:
            try:
                self._prepared[memo] = jwt.PyJWK(jwk, algorithm=alg)
            except jwt.PyJWTError:
                raise TokenRefused("the token's algorithm does not match its key's type") from None
        return self._prepared[memo]

    def _may_refresh(self) -> bool:
        return self._tried_at is None or self._clock() - self._tried_at >= self._min_refresh

    def _stale(self) -> bool:
        old = self._fetched_at is None or self._clock() - self._fetched_at >= self._cache_seconds
        return old and self._may_refresh()

    async def _refresh(self, due: Callable[[], bool]) -> None:
        async with self._lock:
            if not due():  # another request fetched while this one waited
                return
            self._tried_at = self._clock()
            try:
                keys, malformed = await self._fetch()
            except KeysUnavailable as exc:
                # Stale keys beat none: a short issuer outage must not sign everyone out.
                log.warning("oidc keys not refreshed", error=str(exc), cached_keys=len(self._keys))
                return
            # A kid whose new entry is malformed keeps its last good key: a broken entry never replaces it.
            fresh = {k.get("kid") for k in keys}
            kept = [k for k in self._keys if k.get("kid") in malformed and k.get("kid") not in fresh]
            self._keys, self._prepared, self._fetched_at = keys + kept, {}, self._clock()
            log.info("oidc keys fetched", url=self._jwks_url, keys=len(keys), kept=len(kept), fetches=self.fetches)

    async def _fetch(self) -> tuple[list[dict[str, Any]], set[str | None]]:
        """The usable signing keys the issuer publishes, and the kids of the malformed ones."""
        try:
            # A deadline over the whole fetch: httpx's timeout is per read, so an issuer that sends a
            # byte every few seconds would otherwise hold every request waiting on it for minutes.
            async with asyncio.timeout(self._timeout), \
                    httpx.AsyncClient(timeout=self._timeout, follow_redirects=False, verify=default_tls()) as client:
                if self._jwks_url is None:
                    self._jwks_url = await self._discover(client)
                self.fetches += 1
                body = await _get_body(client, self._jwks_url)
        except TimeoutError:
            raise KeysUnavailable(f"{self._jwks_url or self._config.issuer} did not answer within "
                                  f"{self._timeout:g} s (WINGSMITH_OIDC_HTTP_TIMEOUT_SECONDS)") from None
        return await asyncio.to_thread(_read_jwks, body, self._jwks_url)

    async def _discover(self, client: httpx.AsyncClient) -> str:
        url = self._config.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = await asyncio.to_thread(_parse, await _get_body(client, url), url)
        if not isinstance(document, dict) or document.get("issuer") != self._config.issuer:
            # OpenID Connect Discovery 1.0 §4.3: the document must name the issuer it was fetched for.
            raise KeysUnavailable(f"{url} does not name the issuer {self._config.issuer}")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise KeysUnavailable(f"{url} has no jwks_uri")
        try:
            return check_url(jwks_uri, "the discovered jwks_uri")
        except ValueError as exc:
            raise KeysUnavailable(str(exc)) from None


def _signing_key(jwk: Any) -> bool:
    # Symmetric (`oct`) keys are never published signing keys; encryption keys are not for signatures.
    return (isinstance(jwk, dict) and jwk.get("kty") in ("RSA", "EC", "OKP")
            and jwk.get("use") in (None, "sig") and isinstance(jwk.get("kid", ""), str))


def _parse(body: bytes, url: str) -> Any:
    """A document the issuer sent, already bounded in size, bounded in depth and parsed (CPU work on
    untrusted data: callers run it in a thread)."""
    try:
        return loads_bounded(body, max_depth=MAX_JSON_DEPTH)
    except JsonRefused as exc:
        raise KeysUnavailable(f"{url} did not answer usable JSON: {exc}") from None


def _read_jwks(body: bytes, url: str) -> tuple[list[dict[str, Any]], set[str | None]]:
    """The JWKS's usable signing keys, each checked by building it, and the kids of the malformed ones.
    Runs in a thread."""
    document = _parse(body, url)
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise KeysUnavailable(f"{url} is not a JWKS document (no keys list)")
    if len(entries) > MAX_KEYS:
        raise KeysUnavailable(f"{url} publishes {len(entries)} keys; at most {MAX_KEYS} are read")
    keys: list[dict[str, Any]] = []
    malformed: set[str | None] = set()
    for jwk in entries:
        if not _signing_key(jwk):
            continue
        problem = _key_problem(jwk)
        if problem is None:
            keys.append(jwk)
        else:
            kid = jwk.get("kid")
            malformed.add(kid)
            # The kid and what is wrong, never the key's material.
            log.warning("oidc key skipped", url=url, kid=kid if isinstance(kid, str) else None,
                        kty=jwk.get("kty"), problem=problem)
    if not keys:
        raise KeysUnavailable(f"{url} publishes no usable signing key")
    return keys, malformed


def _key_problem(jwk: dict[str, Any]) -> str | None:
    """Why this published key cannot verify anything (None: it can), found by building it."""
    alg = jwk.get("alg")
    if alg is not None and alg not in ASYMMETRIC:
        return "its alg is not an asymmetric signing algorithm"
    try:
        built = jwt.PyJWK(jwk)
    except (jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:
        return type(exc).__name__
    if jwk.get("kty") == "RSA" and getattr(built.key, "key_size", 0) > MAX_RSA_BITS:
        return f"an RSA key over {MAX_RSA_BITS} bits"
    return None


async def _get_body(client: httpx.AsyncClient, url: str) -> bytes:
    try:
        async with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.status_code != 200:
                raise KeysUnavailable(f"{url} answered {response.status_code}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_DOCUMENT_BYTES:
                raise KeysUnavailable(f"{url} sent {declared} bytes; the limit is {MAX_DOCUMENT_BYTES}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise KeysUnavailable(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes")
    except httpx.HTTPError as exc:
        raise KeysUnavailable(f"{url} could not be fetched: {type(exc).__name__}") from None
    return bytes(body)


# --- both together ---------------------------------------------------------------------------------

class OidcVerifier:
    """Token in, `Identity` out (or `TokenRefused`, or `KeysUnavailable` when the issuer cannot be reached)."""

    def __init__(self, config: OidcConfig, keys: KeySet):
        self.config = config
        self.keys = keys

    @classmethod
    def from_settings(cls, settings: Settings) -> OidcVerifier | None:
        config = OidcConfig.from_settings(settings)
        if config is None:
            return None
        return cls(config, KeySet(config, timeout=settings.oidc_http_timeout_seconds,
                                  min_refresh_seconds=settings.oidc_jwks_min_refresh_seconds,
                                  cache_seconds=settings.oidc_jwks_cache_seconds))

    async def identify(self, token: str) -> Identity:
        alg, kid = token_header(token, self.config)
        key = await self.keys.key(kid, alg)
        return identity_of(decode_claims(token, key, self.config), self.config)

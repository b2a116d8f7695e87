"""The gateway's front door: how large a request may be, and who may call an endpoint.

The gateway is the one part of the plane that faces the public, so what it reads from a client is
bounded before anything is parsed, and an endpoint can require a client API key.

Client keys are never stored in plain text. `WINGSMITH_GATEWAY_CLIENT_KEYS_REF` is a *reference*
(an env var name, or `file:<path>`) to a JSON object mapping an endpoint's model name, or `"*"` for
every endpoint, to the SHA-256 hex digests of the keys it accepts:

    {"kimi-k3": ["<sha256 of key 1>", "<sha256 of key 2>"], "*": ["<sha256 of an ops key>"]}

(`printf %s "$KEY" | sha256sum`). It is read on each request, so keys rotate without a restart.
Without the setting every endpoint is open, which is the local default. With it, an endpoint named
in the table (or every one, with `"*"`) needs one of its keys, listing the models needs a key, and
the gateway's /metrics needs the admin token. A table that cannot be read or has any other shape
refuses every request (503) until it is fixed: a mistake never opens the door.

The size cap on request bodies is enforced before any of this, in wingsmith/adapters/body_limit.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time

from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.secrets import SecretUnavailable, read_secret_ref

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
MAX_BODY_ENV = "WINGSMITH_GATEWAY_MAX_BODY_BYTES"
CLIENT_KEYS_ENV = "WINGSMITH_GATEWAY_CLIENT_KEYS_REF"
ALL_ENDPOINTS = "*"
_DIGEST = re.compile(r"[0-9a-fA-F]{64}")

log = get_logger("wingsmith.gateway")


class Refusal(Exception):
    """A request the door turns away, in OpenAI's error terms."""

    def __init__(self, status: int, message: str, kind: str, code: str):
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code


def too_large_message(limit: int) -> str:
    return f"The request body exceeds the gateway's limit of {limit} bytes."


class ClientKeys:
    """The client API keys of each endpoint, read through a reference on every check.

    A table that cannot be read, or is not exactly an object of model name → list of SHA-256 hex
    digests, closes the door: every request that would need checking is refused with 503, and the
    log says why (the client is told only that keys cannot be checked, never a path). An endpoint
    named with an empty list accepts no key at all."""

    def __init__(self, ref: str | None):
        self.ref = ref
        self._last_logged: tuple[str, float] | None = None

    @property
    def on(self) -> bool:
        return self.ref is not None

    def check(self, authorization: str, model: str) -> None:
        """`authorization`: the caller's Authorization header ("" without one)."""
        table = self._table()
        if table is None or (model not in table and ALL_ENDPOINTS not in table):
            return  # keys off, or this endpoint has none configured: open
        if not _matches(_bearer(authorization, f"The model {model!r} needs an API key"), _accepted(table, model)):
            raise Refusal(401, f"Incorrect API key provided for model {model!r}.", "invalid_request_error",
                          "invalid_api_key")

    def check_caller(self, authorization: str, routed: list[str]) -> None:
        """Before a request's body is read, when the model it names is not known yet: refuse a caller
        whose key opens none of the `routed` endpoints, unless one of them is open to all (then the
        body is needed to tell, and `check` runs once it is read)."""
        table = self._table()
        if table is None or (ALL_ENDPOINTS not in table and any(m not in table for m in routed)):
            return
        digest = _bearer(authorization, "This gateway's endpoints need an API key")
        if not _matches(digest, [d for digests in table.values() for d in digests]):
            raise Refusal(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")

    def callable_models(self, authorization: str, models: list[str]) -> list[str]:
        """The routed models this caller may use: with keys on, listing them needs a key that some
        endpoint accepts, and shows the endpoints that key opens plus the open ones."""
        table = self._table()
        if not table:
            return models  # keys off, or no endpoint named: nothing to hide
        digest = _bearer(authorization, "Listing the models needs an API key")
        if not _matches(digest, [d for digests in table.values() for d in digests]):
            raise Refusal(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        keyed = ALL_ENDPOINTS in table
        return [m for m in models if not (keyed or m in table) or _matches(digest, _accepted(table, m))]

    def _table(self) -> dict[str, list[str]] | None:
        if self.ref is None:
            return None
        try:
            table = json.loads(read_secret_ref(self.ref, what="the client keys", setting=CLIENT_KEYS_ENV))
        except SecretUnavailable as exc:
            raise self._closed(str(exc)) from None
        except ValueError:
            raise self._closed(f"{CLIENT_KEYS_ENV} ({self.ref}) is not valid JSON") from None
        if not isinstance(table, dict):
            raise self._closed(f"{CLIENT_KEYS_ENV} ({self.ref}) must be a JSON object of model name → "
                               f"list of SHA-256 hex digests, not a {type(table).__name__}")
        for model, digests in table.items():
            if not isinstance(digests, list) or not all(isinstance(d, str) and _DIGEST.fullmatch(d) for d in digests):
                raise self._closed(f"{CLIENT_KEYS_ENV} ({self.ref}): the entry for {model!r} must be a list of "
                                   "SHA-256 hex digests (64 hex characters each; `printf %s \"$KEY\" | sha256sum`)")
        return {model: [d.lower() for d in digests] for model, digests in table.items()}

    def _closed(self, reason: str) -> Refusal:
        # Logged once a minute per reason: a closed door under traffic must not flood the log.
        now = time.monotonic()
        if self._last_logged is None or self._last_logged[0] != reason or now - self._last_logged[1] > 60:
            log.error("gateway client keys unusable: refusing every request that needs a key", reason=reason)
            self._last_logged = (reason, now)
        return Refusal(503, "The gateway cannot check API keys right now, so it lets no request through; "
                            "its operator's log says why.", "service_unavailable", "client_keys_unavailable")


def _bearer(authorization: str, needs: str) -> str:
    """The SHA-256 digest of the caller's bearer key; 401 without one."""
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise Refusal(401, f"{needs}: send Authorization: Bearer <key>.", "invalid_request_error", "missing_api_key")
    return hashlib.sha256(given.strip().encode()).hexdigest()


def _accepted(table: dict[str, list[str]], model: str) -> list[str]:
    return [*table.get(model, []), *table.get(ALL_ENDPOINTS, [])]


def _matches(digest: str, accepted: list[str]) -> bool:
    # Every digest compared, in constant time: the answer's timing says nothing about near misses.
    return any([hmac.compare_digest(digest, known) for known in accepted])

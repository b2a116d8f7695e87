"""The gateway's front door: how large a request may be, and who may call an endpoint.

The gateway is the one part of the plane that faces the public, so what it reads from a client is
bounded before anything is parsed, and an endpoint can require a client API key.

Client keys are never stored in plain text. `WINGSMITH_GATEWAY_CLIENT_KEYS_REF` is a *reference*
(an env var name, or `file:<path>`) to a JSON object mapping an endpoint's model name, or `"*"` for
every endpoint, to the SHA-256 hex digests of the keys it accepts:

    {"kimi-k3": ["<sha256 of key 1>", "<sha256 of key 2>"], "*": ["<sha256 of an ops key>"]}

(`printf %s "$KEY" | sha256sum`). It is read on each request, so keys rotate without a restart.
Without the setting every endpoint is open, which is the local default.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from starlette.requests import Request

from wingsmith.secrets import SecretUnavailable, read_secret_ref

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
MAX_BODY_ENV = "WINGSMITH_GATEWAY_MAX_BODY_BYTES"
CLIENT_KEYS_ENV = "WINGSMITH_GATEWAY_CLIENT_KEYS_REF"
ALL_ENDPOINTS = "*"


class Refusal(Exception):
    """A request the door turns away, in OpenAI's error terms."""

    def __init__(self, status: int, message: str, kind: str, code: str):
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) as soon as it is known to exceed `limit` bytes: from its
    Content-Length before reading anything, or while reading a body that did not declare it."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large(limit)
    return bytes(body)


def _too_large(limit: int) -> Refusal:
    return Refusal(413, f"The request body exceeds the gateway's limit of {limit} bytes.",
                   "invalid_request_error", "request_too_large")


class ClientKeys:
    """The client API keys of each endpoint, read through a reference on every check."""

    def __init__(self, ref: str | None):
        self.ref = ref

    def check(self, request: Request, model: str) -> None:
        if self.ref is None:
            return
        accepted = self._digests(model)
        if not accepted:
            return  # this endpoint has no keys configured: open
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise Refusal(401, f"The model {model!r} needs an API key: send Authorization: Bearer <key>.",
                          "invalid_request_error", "missing_api_key")
        digest = hashlib.sha256(given.strip().encode()).hexdigest()
        # Every digest compared, in constant time: the answer's timing says nothing about near misses.
        if not any([hmac.compare_digest(digest, known) for known in accepted]):
            raise Refusal(401, f"Incorrect API key provided for model {model!r}.", "invalid_request_error",
                          "invalid_api_key")

    def _digests(self, model: str) -> list[str]:
        assert self.ref is not None
        try:
            table = json.loads(read_secret_ref(self.ref, what="the client keys",
                                               setting=CLIENT_KEYS_ENV))
        except (SecretUnavailable, ValueError) as exc:
            # Misconfigured keys must not open the door: refuse, and say where to look (never a key).
            reason = str(exc) if isinstance(exc, SecretUnavailable) else "it is not valid JSON"
            raise Refusal(503, f"The gateway's client keys cannot be read ({reason}).", "service_unavailable",
                          "client_keys_unavailable") from None
        if not isinstance(table, dict):
            raise Refusal(503, "The gateway's client keys must be a JSON object of model name → SHA-256 digests.",
                          "service_unavailable", "client_keys_unavailable")
        keys = [*_listed(table.get(model)), *_listed(table.get(ALL_ENDPOINTS))]
        return [k.lower() for k in keys if isinstance(k, str)]


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else []

"""A sign-in provider of the tests' own: RSA and EC keys made here, their JWKS (and an OpenID discovery
document) served by a real HTTP server on loopback, and tokens minted with any claims, key or header."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

AUDIENCE = "wingsmith-test"


class SigningKey:
    def __init__(self, kind: str = "RSA", kid: str | None = None):
        self.kid = kid or f"{kind.lower()}-{uuid.uuid4().hex[:8]}"
        self.alg = "RS256" if kind == "RSA" else "ES256"
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA" \
            else ec.generate_private_key(ec.SECP256R1())
        algorithm = jwt.get_algorithm_by_name(self.alg)
        self.jwk: dict[str, Any] = {**json.loads(algorithm.to_jwk(self.private.public_key())), "kid": self.kid,
                                    "use": "sig", "alg": self.alg}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)


class Issuer:
    """Serves `/.well-known/openid-configuration` and `/jwks.json`; counts the JWKS fetches."""

    def __init__(self):
        self.keys = [SigningKey("RSA"), SigningKey("EC")]
        self.jwks_fetches = 0
        self.jwks_override: bytes | None = None  # serve these bytes instead (a hostile or broken JWKS)
        self.jwks_drip_seconds: float | None = None  # send the JWKS one byte per this many seconds
        self.down = False
        self._stopped = threading.Event()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                if issuer.down:
                    self._send(503, b'{"error": "down"}')
                elif self.path == "/.well-known/openid-configuration":
                    self._send(200, json.dumps({"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks.json",
                                                "id_token_signing_alg_values_supported": ["RS256", "ES256"]}
                                               ).encode())
                elif self.path == "/jwks.json":
                    issuer.jwks_fetches += 1
                    body = issuer.jwks_override or json.dumps({"keys": [k.jwk for k in issuer.keys]}).encode()
                    if issuer.jwks_drip_seconds is None:
                        self._send(200, body)
                    else:
                        self._drip(body, issuer.jwks_drip_seconds)
                else:
                    self._send(404, b"{}")

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _drip(self, body: bytes, seconds: float) -> None:
                """A slow issuer: honest headers, then the body a byte at a time (each read gets
                something well within any per-read timeout), until the client hangs up."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    for i in range(len(body)):
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                        if issuer._stopped.wait(seconds):
                            return
                except OSError:
                    return  # the client gave up

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def rsa(self) -> SigningKey:
        return next(k for k in self.keys if k.alg == "RS256")

    @property
    def ec(self) -> SigningKey:
        return next(k for k in self.keys if k.alg == "ES256")

    def claims(self, name: str, roles: list[str], team: str | None = None, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        out: dict[str, Any] = {"iss": self.url, "aud": AUDIENCE, "sub": f"sub-{name}", "preferred_username": name,
                               "roles": roles, "iat": now, "nbf": now, "exp": now + 600}
        if team is not None:
            out["team"] = team
        return {**out, **extra}

    def token(self, name: str, roles: list[str], team: str | None = None, *, key: SigningKey | None = None,
              headers: dict[str, Any] | None = None, **extra: Any) -> str:
        key = key or self.rsa
        return jwt.encode(self.claims(name, roles, team, **extra), key.private, algorithm=key.alg,
                          headers={"kid": key.kid, **(headers or {})})


def unsigned(claims: dict[str, Any], header: dict[str, Any]) -> str:
    """header.payload. with no signature: the `alg: none` token."""
    return f"{_b64(header)}.{_b64(claims)}."


def hmac_signed(claims: dict[str, Any], header: dict[str, Any], secret: bytes) -> str:
    """An HS256 token keyed with `secret` (say, the issuer's public key): the algorithm-confusion attack.
    Built by hand because PyJWT refuses to use a public key as an HMAC secret."""
    signing_input = f"{_b64(header)}.{_b64(claims)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def _b64(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()

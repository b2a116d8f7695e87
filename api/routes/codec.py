"""The remote codec for the Temporal UI: with payload encryption on, the UI shows ciphertext until
it is pointed at `<api>/codec` (`temporal server start-dev --ui-codec-endpoint`, or the UI's own
codec setting), which decrypts for signed-in admins.

The wire format is Temporal's: `{"payloads": [{"metadata": {k: base64}, "data": base64}]}` in and
out, which is exactly the protobuf JSON form of `Payloads`. The UI calls from its own origin, so
these routes answer CORS for `WINGSMITH_TEMPORAL_UI_URL` only; the UI sends the bearer token when
its "pass access token" option is on.

Decoding needs the admin role. Payloads hold every team's workflows (workload specs, endpoint
members, who asked for what), and neither side names a team: a payload carries none, and the UI's
call carries only the namespace, not the workflow the payloads came from. So the codec cannot tell
one team's payloads from another's, and only a principal who may read every team's objects may open
them; a team's members read their own through the API and the console, which answer by team.
Encoding makes payloads that workers act on, so it needs an operator.
"""

from __future__ import annotations

import json
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from api.auth import Principal, authenticate, authorize
from api.deps import SettingsDep
from api.errors import ApiError
from api.responses import PayloadsAnswer
from wingsmith.adapters.codec import EncryptionCodec, PayloadKeyError, codec_from_settings
from wingsmith.domain.config import Settings

router = APIRouter(prefix="/codec", tags=["codec"])

_ALLOWED_HEADERS = "authorization, content-type, x-namespace"


def ui_origin(settings: Settings) -> str:
    parts = urlsplit(settings.temporal_ui_url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _cors_headers(request: Request) -> dict[str, str]:
    origin = request.headers.get("origin")
    if not origin or origin.rstrip("/").lower() != ui_origin(request.app.state.settings):
        return {}
    return {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true", "Vary": "Origin"}


def _with_cors(role: str, why: str = ""):
    """`require(role)`, with CORS headers on its 401/403 so the UI can show why it was refused
    instead of a bare network error; `why` is added to the 403's message."""
    async def dependency(request: Request) -> Principal:  # no I/O: async, so no thread hop
        try:
            return authorize(await authenticate(request), role)
        except ApiError as exc:
            if exc.status == 403 and why:
                exc.message = f"{exc.message}: {why}"
            exc.headers = {**(exc.headers or {}), **_cors_headers(request)}
            raise

    dependency.__name__ = f"codec_{role}"
    return dependency


CodecAdmin = Annotated[Principal, Depends(_with_cors(
    "admin", "decoding opens every team's payloads (a payload names no team), so only an admin may"))]
CodecOperator = Annotated[Principal, Depends(_with_cors("operator"))]


def _codec(request: Request, settings: Settings) -> EncryptionCodec:
    cached = getattr(request.app.state, "payload_codec", None)
    if cached is not None:
        return cached
    cors = _cors_headers(request)
    try:
        codec = codec_from_settings(settings)
    except PayloadKeyError as exc:
        raise ApiError(503, f"the payload codec is misconfigured: {exc}", headers=cors) from None
    if codec is None:
        raise ApiError(404, "payload encryption is not configured (WINGSMITH_PAYLOAD_KEY_REF is unset), "
                            "so there is nothing to decode", code="codec_not_configured", headers=cors)
    request.app.state.payload_codec = codec
    return codec


async def _payloads(request: Request) -> Payloads:
    cors = _cors_headers(request)
    try:
        body = json.loads(await request.body() or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"body is not JSON: {exc}", headers=cors) from None
    if not isinstance(body, dict) or not isinstance(body.get("payloads"), list):
        raise ApiError(400, 'body must be {"payloads": [{"metadata": {...}, "data": "<base64>"}]}', headers=cors)
    try:
        return json_format.ParseDict(body, Payloads())
    except json_format.ParseError as exc:
        raise ApiError(400, f"payloads are not in Temporal's JSON form (metadata values and data are "
                            f"base64): {exc}", headers=cors) from None


# The body is read by hand (protobuf JSON, not a pydantic model); this documents it for /docs.
_PAYLOADS_SCHEMA = {"type": "object", "required": ["payloads"], "properties": {"payloads": {
    "type": "array", "items": {"type": "object", "properties": {
        "metadata": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
        "data": {"type": "string", "format": "byte"}}}}}}
_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": _PAYLOADS_SCHEMA}}}}


def _answer(request: Request, payloads) -> JSONResponse:
    body = json_format.MessageToDict(Payloads(payloads=payloads))
    body.setdefault("payloads", [])
    return JSONResponse(body, headers=_cors_headers(request))


# The answers are built from protobuf JSON (with CORS headers) by hand; the model documents them.
@router.post("/decode", response_model=PayloadsAnswer, summary="Decrypt payloads for the Temporal UI (admins)",
             openapi_extra=_BODY)
async def decode(request: Request, settings: SettingsDep, _who: CodecAdmin) -> JSONResponse:
    codec = _codec(request, settings)
    payloads = await _payloads(request)
    try:
        decoded = await codec.decode(payloads.payloads)
    except PayloadKeyError as exc:
        raise ApiError(422, str(exc), code="undecodable", headers=_cors_headers(request)) from None
    return _answer(request, decoded)


@router.post("/encode", response_model=PayloadsAnswer, summary="Encrypt payloads for the Temporal UI",
             openapi_extra=_BODY)
async def encode(request: Request, settings: SettingsDep, _who: CodecOperator) -> JSONResponse:
    codec = _codec(request, settings)
    payloads = await _payloads(request)
    return _answer(request, await codec.encode(payloads.payloads))


@router.options("/{operation}", include_in_schema=False, response_class=Response, response_model=None)
async def preflight(request: Request, operation: str) -> Response:
    if operation not in ("decode", "encode"):
        raise ApiError(404, f"no codec operation {operation!r} (decode or encode)")
    cors = _cors_headers(request)
    if not cors:
        raise ApiError(403, f"origin {request.headers.get('origin')!r} is not the Temporal UI "
                            f"({ui_origin(request.app.state.settings)}, WINGSMITH_TEMPORAL_UI_URL)")
    return Response(status_code=204, headers={**cors, "Access-Control-Allow-Methods": "POST, OPTIONS",
                                              "Access-Control-Allow-Headers": _ALLOWED_HEADERS,
                                              "Access-Control-Max-Age": "600"})

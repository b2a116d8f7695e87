"""One error shape for every 4xx/5xx the API returns:

    {"error": {"code": "not_found", "message": "artifact x not found", "details": {...}}}

Route code raises `ApiError`; FastAPI's own validation errors and HTTPExceptions are rewritten
into the same shape so a client has exactly one thing to parse.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from asyncpg.exceptions import (
    CharacterNotInRepertoireError,
    InterfaceError,
    OperatorInterventionError,
    PostgresConnectionError,
    UntranslatableCharacterError,
)
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException

from wingsmith.adapters.body_limit import RequestTooLarge
from wingsmith.domain.text import unstorable_reason

_CODES = {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
          405: "method_not_allowed", 409: "conflict", 413: "too_large", 422: "invalid", 429: "rate_limited",
          503: "unavailable"}


class ErrorResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: an error may echo what the caller sent, and a
    lone surrogate in it cannot be encoded as UTF-8, which would turn a 422 into a 500."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, code: str | None = None,
                 details: Any = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message
        self.details = details
        self.headers = headers


def error_body(code: str, message: str, details: Any = None) -> dict:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return {"error": body}


def temporal_unavailable() -> ApiError:
    """What a request that must reach Temporal answers while the API has no client (not reachable at start,
    not yet reconnected by /readyz): nothing was started or changed."""
    return ApiError(503, "Temporal is not reachable, so nothing was started or changed; retry once it is "
                         "(GET /readyz says when)", code="temporal_unavailable", headers={"Retry-After": "5"})


def request_too_large(limit: int) -> ErrorResponse:
    """The answer to a body refused by its declared size (wingsmith/adapters/body_limit.py), in the words used for one
    cut off while it was read."""
    return ErrorResponse(error_body(_CODES[413], str(RequestTooLarge(limit).detail)), status_code=413)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _methods_for(req: Request) -> list[str]:
    # The router's Allow header names only the first route whose path matched, not all of them.
    methods = set()
    for route in iter_route_contexts(req.app.routes):
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(req.url.path):
            methods |= set(route.methods or ())
    return sorted(methods - {"HEAD"})


def _framework_message(req: Request, exc: StarletteHTTPException) -> str:
    """The router's own refusals carry only a status phrase; say which request it refused and why."""
    asked = f"{req.method} {req.url.path}"
    if exc.status_code == 404:
        return f"no such route: {asked}"
    if exc.status_code == 405:
        allowed = _methods_for(req)
        return f"method not allowed: {asked}" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    return f"{_phrase(exc.status_code) or 'request refused'}: {asked}"


def _problem(err: dict) -> str:
    # pydantic's own words for a lone surrogate ("unable to parse raw data as a unicode string") do
    # not say which character is wrong; say it the way wingsmith.domain.text does for NUL.
    if err.get("type") == "string_unicode":
        return unstorable_reason("\ud800") or ""
    return str(err.get("msg"))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_req: Request, exc: ApiError):
        return ErrorResponse(error_body(exc.code, exc.message, exc.details), status_code=exc.status,
                            headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(req: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else ""
        if message in ("", _phrase(exc.status_code)):
            message = _framework_message(req, exc)
        return ErrorResponse(error_body(_CODES.get(exc.status_code, "error"), message),
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(CharacterNotInRepertoireError)
    @app.exception_handler(UntranslatableCharacterError)
    @app.exception_handler(UnicodeEncodeError)
    async def _unstorable_text(_req: Request, _exc: Exception):
        # Request models refuse such text by field (wingsmith.domain.text); this catches what arrives another
        # way (a path or query value): Postgres cannot hold NUL, nothing can encode a lone surrogate.
        return ErrorResponse(error_body("invalid_text", "a text value in this request contains a character "
                                        "that cannot be stored (NUL \\u0000, or a lone surrogate "
                                        "\\ud800-\\udfff); remove it and retry"),
                             status_code=422)

    @app.exception_handler(ConnectionError)
    @app.exception_handler(PostgresConnectionError)
    @app.exception_handler(OperatorInterventionError)
    @app.exception_handler(InterfaceError)
    async def _registry_unreachable(_req: Request, _exc: Exception):
        # Postgres restarting or away: nothing was changed, and the same request will work again.
        return ErrorResponse(error_body("unavailable", "the registry (PostgreSQL) cannot be reached right now; "
                                       "nothing was changed, retry in a few seconds"),
                            status_code=503, headers={"Retry-After": "2"})

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_req: Request, exc: RequestValidationError):
        problems = [{"field": ".".join(str(p) for p in err.get("loc", ())), "problem": _problem(err)}
                    for err in exc.errors()]
        summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems) or "invalid request"
        return ErrorResponse(error_body("invalid", summary, problems), status_code=422)

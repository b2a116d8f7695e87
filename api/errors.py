"""One error shape for every 4xx/5xx the API returns:

    {"error": {"code": "not_found", "message": "artifact x not found", "details": {...}}}

Route code raises `ApiError`; FastAPI's own validation errors and HTTPExceptions are rewritten
into the same shape so a client has exactly one thing to parse.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

_CODES = {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
          405: "method_not_allowed", 409: "conflict", 422: "invalid", 429: "rate_limited",
          503: "unavailable"}


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


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_req: Request, exc: ApiError):
        return JSONResponse(error_body(exc.code, exc.message, exc.details), status_code=exc.status,
                            headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_req: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        return JSONResponse(error_body(_CODES.get(exc.status_code, "error"), message),
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_req: Request, exc: RequestValidationError):
        problems = [{"field": ".".join(str(p) for p in err.get("loc", ())), "problem": err.get("msg")}
                    for err in exc.errors()]
        summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems) or "invalid request"
        return JSONResponse(error_body("invalid", summary, problems), status_code=422)

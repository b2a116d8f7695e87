"""The gateway's own answers, in OpenAI's error shape (`{"error": {message, type, param, code}}`), so
an OpenAI client reports them as it reports the backends' own errors."""

from __future__ import annotations

from starlette.responses import JSONResponse

from gateway.guard import Refusal, too_large_message


def openai_error(status: int, message: str, kind: str, code: str | None = None,
                 param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}},
                        status_code=status)


def unknown_model(name: str) -> JSONResponse:
    return openai_error(404, f"The model `{name}` does not exist or is not routed by this gateway.",
                        "invalid_request_error", "model_not_found", "model")


def too_large(limit: int) -> JSONResponse:
    return openai_error(413, too_large_message(limit), "invalid_request_error", "request_too_large")


def refused_by_door(refusal: Refusal) -> JSONResponse:
    resp = openai_error(refusal.status, refusal.message, refusal.kind, refusal.code)
    if refusal.status == 401:
        resp.headers["WWW-Authenticate"] = "Bearer"
    return resp


def unauthorized(message: str, code: str) -> JSONResponse:
    resp = openai_error(401, message, "authentication_error", code)
    resp.headers["WWW-Authenticate"] = "Bearer"
    return resp

"""How console pages are rendered: one Jinja2 environment, one route class that turns errors into
pages, and the small helpers every page module shares."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from api.errors import ApiError
from console.links import outside_url
from console.words import card_name, layout_name
from wingsmith.domain.quotas import line_words

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")

STATE_WORDS = {
    "resolving": "being resolved", "draft": "waiting for review", "approved": "approved", "rejected": "rejected",
    "expired": "expired without a decision", "superseded": "replaced by a newer registration",
    "failed": "failed",
}


class LoginRequired(Exception):
    """Raised by the console's auth dependencies; the route class turns it into a redirect."""


def shell_command(env: dict[str, str], argv: list[str]) -> str:
    """A command a person can paste: env assignments, then one flag (and its value) per line."""
    lines = [f"{k}={_quote(v)} \\" for k, v in env.items()]
    head, rest = argv[:3], argv[3:]
    parts: list[list[str]] = [head]
    for token in rest:
        if token.startswith("--") or not parts[-1][-1].startswith("--"):
            parts.append([token])
        else:
            parts[-1].append(token)
    body = [" ".join(_quote(t) for t in part) for part in parts]
    lines += [body[0] + (" \\" if len(body) > 1 else "")]
    lines += ["  " + b + (" \\" if i < len(body) - 2 else "") for i, b in enumerate(body[1:])]
    return "\n".join(lines)


def _quote(token: str) -> str:
    # Shell variables the recipe leaves for the operator ($HEAD_NODE_IP) must stay expandable.
    if token.startswith("$") and token[1:].replace("_", "").isalnum():
        return token
    return shlex.quote(token)


templates.env.filters["state_words"] = lambda s: STATE_WORDS.get(s, s)
templates.env.filters["short_sha"] = lambda s: (s or "")[:12]
templates.env.filters["when"] = lambda t: _when(t)
templates.env.filters["outside_url"] = outside_url
templates.env.globals["shell_command"] = shell_command
templates.env.globals["layout_name"] = layout_name
templates.env.globals["card_name"] = card_name
templates.env.globals["line_words"] = line_words


def _when(value) -> str:
    """A time as a person reads it: minutes, in UTC."""
    from datetime import datetime
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M UTC")


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    from console.session import csrf_token, remember_csrf, session_principal
    context.setdefault("principal", session_principal(request))
    context.setdefault("csrf", csrf_token(request))
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    remember_csrf(request, response)
    return response


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    titles = {400: "That request was not understood", 401: "Please sign in", 403: "Not allowed",
              404: "Not found", 409: "Not possible right now", 422: "Something in the request is wrong",
              503: "A part of the plane is not reachable"}
    return render(request, "error.html", status_code=status, title=titles.get(status, "Something went wrong"),
                  message=message)


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def safe_next(target: str | None) -> str:
    """Where to go after signing in: only a console path, never another site."""
    if target and target.startswith("/console") and not target.startswith("//") and "\\" not in target:
        return target
    return "/console"


async def read_form(request: Request) -> dict[str, list[str]]:
    """The urlencoded body of a console form (no multipart: the console's forms carry no files)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return parse_qs(body, keep_blank_values=True)


def first(form: dict[str, list[str]], key: str, default: str = "") -> str:
    values = form.get(key)
    return values[0] if values else default


class ConsoleRoute(APIRoute):
    """Console routes answer in HTML: a missing sign-in redirects to the login page, and every
    ApiError (the one the REST routes raise) becomes a page carrying the same message."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        # Pages and redirects, never JSON: said here once, so no page infers a JSON response model
        # from its return annotation (tests/api_guard/test_response_models.py checks every route).
        kwargs.update(response_class=HTMLResponse, response_model=None)
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def console_handler(request: Request) -> Response:
            from console.session import resolve_session
            await resolve_session(request)  # an SSO token may need the issuer's keys: awaited here, once
            try:
                return await handler(request)
            except LoginRequired:
                from urllib.parse import quote
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return redirect(f"/console/login?next={quote(target, safe='')}")
            except ApiError as err:
                return error_page(request, err.status, err.message)
            except RequestValidationError as err:
                problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                                     for e in err.errors())
                return error_page(request, 422, problems or "invalid request")

        return console_handler

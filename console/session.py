"""Signing in to the console: an API token pasted once becomes an HttpOnly, SameSite=Strict cookie
(the same `wingsmith_token` cookie api.auth accepts), and every form carries a per-session CSRF
token that must match the one in its own HttpOnly cookie."""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse

from api.auth import ROLES, Principal, bind_principal, principal_for
from api.errors import ApiError
from console.rendering import HERE, ConsoleRoute, LoginRequired, first, read_form, redirect, render, safe_next

TOKEN_COOKIE = "wingsmith_token"
CSRF_COOKIE = "wingsmith_csrf"
CSRF_FIELD = "csrf"
SESSION_SECONDS = 12 * 3600
# Browsers keep cookies up to 4096 bytes, name and attributes included.
MAX_COOKIE_TOKEN = 3800

router = APIRouter(route_class=ConsoleRoute)


async def signed_in(request: Request) -> Principal | None:
    """Who the session cookie names, once per request; None when there is none or its token no longer
    passes (an SSO token expires long before the cookie does: the person signs in again)."""
    if hasattr(request.state, "console_principal"):
        return request.state.console_principal
    token = request.cookies.get(TOKEN_COOKIE)
    principal = None
    if token:
        try:
            principal = await principal_for(request.app, token)
        except ApiError as refused:
            if refused.status != 401:
                raise
    request.state.console_principal = principal
    return principal


async def resolve_session(request: Request) -> None:
    """Run by the console's route class before every page, so `session_principal` (for code that cannot
    await, such as `render`) knows who is signed in. A sign-in that cannot be checked right now (the
    issuer's keys are unreachable) leaves public pages and the login page working; pages that need the
    person raise it again from their dependency."""
    try:
        await signed_in(request)
    except ApiError:
        pass


def session_principal(request: Request) -> Principal | None:
    return getattr(request.state, "console_principal", None)


def require_console(role: str):
    async def dependency(request: Request) -> Principal:  # no blocking I/O: async, so no thread hop
        principal = await signed_in(request)
        if principal is None:
            raise LoginRequired()
        bind_principal(principal)
        if not principal.has(role):
            raise ApiError(403, f"You are signed in as {principal.name} ({', '.join(sorted(principal.roles))}); "
                                f"this needs the {role} role.")
        return principal

    dependency.__name__ = f"console_{role}"
    return dependency


ConsoleViewer = Annotated[Principal, Depends(require_console("viewer"))]
ConsoleOperator = Annotated[Principal, Depends(require_console("operator"))]
ConsoleApprover = Annotated[Principal, Depends(require_console("approver"))]


def csrf_token(request: Request) -> str:
    """This browser session's CSRF token; a new one is made (and set by `render`) when there is none."""
    existing = getattr(request.state, "csrf", None) or request.cookies.get(CSRF_COOKIE)
    if not existing:
        existing = request.state.csrf_new = secrets.token_urlsafe(24)
    request.state.csrf = existing
    return existing


def remember_csrf(request: Request, response) -> None:
    new = getattr(request.state, "csrf_new", None)
    if new:
        _set_cookie(request, response, CSRF_COOKIE, new)


# The token cookie is also sent to the payload codec, so a Temporal UI on the same site (localhost,
# any port) with "include cross-origin credentials" decodes payloads for whoever signed in here.
TOKEN_PATHS = ("/console", "/codec")


def _set_cookie(request: Request, response, name: str, value: str, path: str = "/console") -> None:
    response.set_cookie(name, value, max_age=SESSION_SECONDS, path=path, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


def check_csrf(request: Request, form: dict[str, list[str]]) -> None:
    """Refuse a form that did not come from a console page of this browser session."""
    expected = request.cookies.get(CSRF_COOKIE, "")
    sent = first(form, CSRF_FIELD)
    origin = request.headers.get("origin")
    if origin and origin != "null":
        here = urlsplit(str(request.base_url))
        there = urlsplit(origin)
        if (there.scheme, there.netloc) != (here.scheme, here.netloc):
            raise ApiError(403, "This form was sent from another site, so it was refused.", code="csrf")
    if not expected or not sent or not hmac.compare_digest(expected.encode(), sent.encode()):
        raise ApiError(403, "This form has expired or did not come from this console. Reload the page and "
                            "try again.", code="csrf")


@router.get("/static/console.css")
def stylesheet() -> FileResponse:
    return FileResponse(HERE / "static" / "console.css", media_type="text/css",
                        headers={"Cache-Control": "public, max-age=300"})


@router.get("/static/console.js")
def script() -> FileResponse:
    return FileResponse(HERE / "static" / "console.js", media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=300"})


def local_tokens_file(request: Request) -> str | None:
    """Where `wingsmith up` keeps this plane's local tokens; None when the plane reads a token table
    (`WINGSMITH_AUTH_TOKENS`) instead, whose whereabouts are its operators' business, not the page's."""
    settings = request.app.state.settings
    return None if settings.auth_tokens else str(settings.tokens_file)


@router.get("/login")
def login_page(request: Request, next: str | None = None):
    return render(request, "login.html", next=safe_next(next), roles=ROLES, tokens_file=local_tokens_file(request))


@router.post("/login")
async def login(request: Request):
    form = await read_form(request)
    check_csrf(request, form)
    token = first(form, "token").strip()
    target = safe_next(first(form, "next"))
    principal, status, message = None, 422, "Paste your API token to sign in."
    if token:
        try:
            principal = await principal_for(request.app, token)
        except ApiError as refused:
            status, message = refused.status, _refusal_words(refused)
    if principal is not None and len(token) > MAX_COOKIE_TOKEN:
        # A browser drops a larger cookie without a word, and the person would land on this page again.
        principal, status, message = None, 422, (
            f"This token is {len(token):,} characters long; a browser keeps at most about {MAX_COOKIE_TOKEN:,} in "
            "a cookie. Ask your identity provider for a smaller token (fewer claims), or use the API or CLI.")
    if principal is None:
        return render(request, "login.html", status_code=status, next=target, roles=ROLES, error=message,
                      principal=None, tokens_file=local_tokens_file(request))
    response = redirect(target)
    for path in TOKEN_PATHS:
        _set_cookie(request, response, TOKEN_COOKIE, token, path)
    # A fresh CSRF token per sign-in: one planted before sign-in is worth nothing after it.
    _set_cookie(request, response, CSRF_COOKIE, secrets.token_urlsafe(24))
    return response


def _refusal_words(refused: ApiError) -> str:
    if refused.status == 401 and refused.message == "unknown token":
        return ("That token is not known to this plane. Check that it was copied whole, or ask an admin "
                "for a new one.")
    # A sign-in token's own reason (expired, another audience, no role...) tells the person what to fix.
    return refused.message[:1].upper() + refused.message[1:] + "."


@router.post("/logout")
async def logout(request: Request):
    form = await read_form(request)
    check_csrf(request, form)
    response = redirect("/console/login?signed_out=1")
    for name, path in [(CSRF_COOKIE, "/console"), *((TOKEN_COOKIE, p) for p in TOKEN_PATHS)]:
        response.delete_cookie(name, path=path, httponly=True, samesite="strict")
    return response

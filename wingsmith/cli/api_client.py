"""How CLI commands talk to a running plane: HTTP to its API (found as wingsmith/cli/plane.py says)
with a bearer token from `token(role)`. Exit codes mean something: 2 invalid, 3 not found,
4 not allowed, 5 conflict, 1 anything else (unreachable, server error)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from wingsmith.adapters.http_tls import default_tls

EXIT = {400: 2, 401: 4, 403: 4, 404: 3, 409: 5, 422: 2}
API_HELP = "API base URL (default: $WINGSMITH_API_URL, else the plane in $WINGSMITH_HOME/plane.json)"


def add_common(parser) -> None:
    parser.add_argument("--api", default=None, help=API_HELP)
    parser.add_argument("--json", action="store_true", help="print the API's JSON instead of a table")


def token(role: str = "admin") -> str | None:
    """The bearer token for a call that needs `role`.

    Explicit tokens first: WINGSMITH_APPROVER_TOKEN for approvals, WINGSMITH_TOKEN for everything
    (else). Otherwise a principal from the plane's table (WINGSMITH_AUTH_TOKENS, else the local
    tokens `wingsmith up` made): for approvals, the first approver who is *not* the principal the CLI
    registers and operates as, so four-eyes review passes with a team table as on a laptop."""
    from wingsmith.domain.config import get_settings
    from wingsmith.local.tokens import holder_with

    if role == "approver" and os.environ.get("WINGSMITH_APPROVER_TOKEN"):
        return os.environ["WINGSMITH_APPROVER_TOKEN"]
    if os.environ.get("WINGSMITH_TOKEN"):
        return os.environ["WINGSMITH_TOKEN"]
    settings = get_settings()
    if role != "approver":
        holder = holder_with(settings, role)
        return holder.token if holder else None
    operator = holder_with(settings, "operator")
    holder = holder_with(settings, "approver", not_named=operator.name if operator else None)
    return holder.token if holder else None


def base_url(args) -> str:
    from wingsmith.cli.plane import api_url
    return api_url(getattr(args, "api", None))


def request(args, method: str, path: str, body: Any = None, *, prog: str, params: dict | None = None,
            timeout: float = 60, role: str = "admin", quiet: bool = False,
            headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """(exit code, JSON body or None). Errors are printed in the API's words (unless `quiet`: a poll
    that expects "not found" for a while)."""
    import httpx

    base = base_url(args)
    sent = {**(headers or {}), **({"Authorization": f"Bearer {tok}"} if (tok := token(role)) else {})}
    try:
        response = httpx.request(method, base + path, json=body, params=params, headers=sent, timeout=timeout,
                                 verify=default_tls())
    except httpx.HTTPError as exc:
        print(f"{prog}: the API at {base} is not reachable ({type(exc).__name__})", file=sys.stderr)
        return 1, None
    data = response.json() if response.content else None
    if response.status_code >= 400:
        error = data.get("error", {}) if isinstance(data, dict) else {}
        if not quiet:
            print(f"{prog}: {error.get('message') or f'HTTP {response.status_code}'}", file=sys.stderr)
        return EXIT.get(response.status_code, 1), data
    return 0, data


def call(args, method: str, path: str, body: Any, render: Callable[[Any], str], *, prog: str,
         params: dict | None = None, role: str = "admin") -> int:
    code, data = request(args, method, path, body, prog=prog, params=params, role=role)
    if code == 0:
        print(json.dumps(data, indent=2, default=str) if getattr(args, "json", False) else render(data))
    return code


def table(header: tuple[str, ...], rows: list[tuple]) -> str:
    cells = [tuple(str(c) for c in header)] + [tuple("-" if c in (None, "") else str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def pairs(rows: list[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {'-' if v in (None, '') else v}" for k, v in rows)

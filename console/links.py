"""Links to places outside the plane (the Hub, upstream recipes, the Temporal UI) come from data the
plane does not control: a model card's `license_link` is whatever its author typed. Only http(s)
URLs become links; anything else (`javascript:`, `data:`, a relative path) is shown as text."""

from __future__ import annotations

from urllib.parse import urlsplit

LINK_SCHEMES = frozenset({"http", "https"})


def outside_url(value: object) -> str | None:
    """`value` if it is an absolute http(s) URL with a host and nothing a browser would read
    differently from us (whitespace, control characters, backslashes); otherwise None."""
    if not isinstance(value, str) or not value or len(value) > 2048:
        return None
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F or ch == "\\" for ch in value):
        return None
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in LINK_SCHEMES or not host:
        return None
    return value

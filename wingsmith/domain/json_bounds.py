"""JSON from outside, parsed within bounds: its nesting depth is measured before the parser sees it.

`json.loads` recurses once per nested array or object, so a document of a few hundred kilobytes of
`[` raises RecursionError (or, in a thread with a small stack, worse) long before any size limit
trips. The depth is counted by a scan that visits only brackets, quotes and backslashes, so its cost
is linear in the size the caller already bounded. Callers bound the size first and run this off the
event loop (it is CPU work on untrusted data)."""

from __future__ import annotations

import json
import re
from typing import Any

_SPECIAL = re.compile(rb'[\[\]{}"\\]')


class JsonRefused(ValueError):
    """Not JSON, or JSON nested deeper than allowed; the message says which, never the content."""


def depth_of(data: bytes) -> int:
    """The deepest nesting of arrays and objects in `data`, brackets inside strings not counted."""
    depth = deepest = 0
    in_string = False
    escaped = -1  # the position a backslash escapes
    for match in _SPECIAL.finditer(data):
        char, at = match.group(), match.start()
        if in_string:
            if at == escaped:
                continue
            if char == b"\\":
                escaped = at + 1
            elif char == b'"':
                in_string = False
        elif char == b'"':
            in_string = True
        elif char in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif char in (b"]", b"}"):
            depth -= 1
    return deepest


def loads_bounded(data: bytes, *, max_depth: int) -> Any:
    """`json.loads(data)` once its nesting is known to be at most `max_depth`."""
    depth = depth_of(data)
    if depth > max_depth:
        raise JsonRefused(f"JSON nested {depth} deep; at most {max_depth} is read")
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise JsonRefused("not JSON") from None

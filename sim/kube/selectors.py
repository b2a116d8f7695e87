"""Label and field selectors in the query-string syntax the API server accepts."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sim.kube.errors import bad_request

Predicate = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([^\s!=]+)\s*(==|=|!=)\s*([^\s]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a `(a,b)` value set."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t for t in terms if t.strip()]


def _term(term: str) -> Callable[[dict[str, str]], bool]:
    if match := _SET_RE.match(term):
        key, op, values = match.group(1), match.group(2), {v.strip() for v in match.group(3).split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _CMP_RE.match(term):
        key, op, value = match.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match := _EXISTS_RE.match(term):
        negate, key = match.groups()
        return (lambda labels: key not in labels) if negate else (lambda labels: key in labels)
    raise bad_request(f"unable to parse requirement: {term.strip()!r}")


def label_selector(selector: str | None) -> Predicate:
    if not selector:
        return lambda obj: True
    terms = [_term(t) for t in _split_terms(selector)]
    return lambda obj: all(t((obj.get("metadata") or {}).get("labels") or {}) for t in terms)


def field_selector(selector: str | None) -> Predicate:
    """Equality on dotted paths (`metadata.name=x`, `spec.nodeName=n`, `status.phase!=Running`)."""
    if not selector:
        return lambda obj: True
    checks = []
    for term in _split_terms(selector):
        match = _CMP_RE.match(term)
        if not match:
            raise bad_request(f"invalid field selector: {term.strip()!r}")
        checks.append(match.groups())

    def value_at(obj: dict[str, Any], dotted: str) -> str:
        current: Any = obj
        for part in dotted.split("."):
            current = current.get(part) if isinstance(current, dict) else None
        return "" if current is None else str(current)

    return lambda obj: all((value_at(obj, k) == v) == (op != "!=") for k, op, v in checks)

"""The list of every recipe, searchable and filtered by card, task, size and layout on the server (query
parameters, so it works without JavaScript). Each recipe's facts are worked out once per catalog version:
its layouts come from the same evidence the model page shows, so a filter never promises a layout the
page then lacks."""

from __future__ import annotations

import re

from pydantic import BaseModel

from api.errors import ApiError
from console.words import card_name, layout_name
from wingsmith.domain.recipes import Catalog, evidence_for

MAX_QUERY = 200
# Sizes as a person shops for them: the bucket's name and its upper bound in parameters.
SIZES = [("small", "under 10B", 10e9), ("medium", "10B to 100B", 100e9), ("large", "100B to 500B", 500e9),
         ("huge", "500B and more", float("inf"))]
NOT_STATED = ("unstated", "size not stated")
_COUNT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMBT])\s*$", re.I)
_SCALE = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


class IndexEntry(BaseModel):
    path: str
    model_id: str
    title: str
    variants: list[str]
    parameter_count: str
    size: str
    tasks: list[str]
    cards: list[str]  # hardware ids the recipe verifies or supports
    layouts: list[str]


class IndexFilter(BaseModel):
    q: str = ""
    card: str = ""
    task: str = ""
    size: str = ""
    layout: str = ""


class Choices(BaseModel):
    cards: list[tuple[str, str]]
    tasks: list[tuple[str, str]]
    sizes: list[tuple[str, str]]
    layouts: list[tuple[str, str]]


def size_bucket(parameter_count: str | None) -> str:
    found = _COUNT.match(parameter_count or "")
    if not found:
        return NOT_STATED[0]
    count = float(found.group(1)) * _SCALE[found.group(2).upper()]
    return next(name for name, _, bound in SIZES if count < bound)


_BY_VERSION: dict[str, list[IndexEntry]] = {}


def _entries(catalog: Catalog) -> list[IndexEntry]:
    out = []
    for recipe in sorted(catalog.recipes.values(), key=lambda r: r.path.lower()):
        match = catalog.find(recipe.model_id)
        evidence = evidence_for(match, catalog) if match else None
        out.append(IndexEntry(
            path=recipe.path, model_id=recipe.model_id, title=recipe.title, variants=list(recipe.variants),
            parameter_count=recipe.parameter_count or "", size=size_bucket(recipe.parameter_count),
            tasks=list(recipe.tasks),
            cards=[hw for hw, status in recipe.hardware.items() if status in ("verified", "supported")],
            layouts=[lay.name for lay in evidence.layouts if lay.allowed] if evidence else []))
    return out


def index_entries(catalog: Catalog) -> list[IndexEntry]:
    """Worked out once per catalog version (about two seconds for the whole catalog)."""
    if catalog.version not in _BY_VERSION:
        _BY_VERSION[catalog.version] = _entries(catalog)
    return _BY_VERSION[catalog.version]


def choices(entries: list[IndexEntry]) -> Choices:
    cards = sorted({c for e in entries for c in e.cards}, key=lambda c: card_name(c).lower())
    layouts = sorted({lay for e in entries for lay in e.layouts})
    tasks = sorted({t for e in entries for t in e.tasks})
    return Choices(cards=[(c, card_name(c)) for c in cards], tasks=[(t, t) for t in tasks],
                   sizes=[(name, words) for name, words, _ in SIZES] + [NOT_STATED],
                   layouts=[(lay, layout_name(lay)) for lay in layouts])


def checked(filters: IndexFilter, offered: Choices) -> IndexFilter:
    """The filter as asked, or a 422 that names what is offered: a value from an old link or a typed URL
    gets an answer, not an empty list that looks like "no models"."""
    if len(filters.q) > MAX_QUERY:
        raise ApiError(422, f"The search is {len(filters.q)} characters long; at most {MAX_QUERY}.")
    for field, known in (("card", [c for c, _ in offered.cards]), ("task", [t for t, _ in offered.tasks]),
                         ("size", [s for s, _ in offered.sizes]), ("layout", [lay for lay, _ in offered.layouts])):
        value = getattr(filters, field)
        if value and value not in known:
            raise ApiError(422, f"There is no {field} called {value!r} in the catalog. "
                                f"{field.capitalize()}s: {', '.join(known)}.")
    return filters


def filtered(entries: list[IndexEntry], f: IndexFilter) -> list[IndexEntry]:
    words = f.q.lower().split()
    return [e for e in entries
            if all(w in f"{e.model_id} {e.title}".lower() for w in words)
            and (not f.card or f.card in e.cards) and (not f.task or f.task in e.tasks)
            and (not f.size or f.size == e.size) and (not f.layout or f.layout in e.layouts)]

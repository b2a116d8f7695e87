"""What the console's create forms share: the API's words for a body it refuses, and reading the
form fields into the API's own request models."""

from __future__ import annotations

from pydantic import ValidationError


def refusal_words(exc: ValidationError) -> str:
    """The message the API's validation handler (api/errors.py) gives for the same body, word for word:
    the console builds the same request model, so `body.<field>: <problem>` reads the same in both."""
    problems = [f"{'.'.join(('body', *(str(p) for p in e.get('loc', ()))))}: {e.get('msg')}" for e in exc.errors()]
    return "; ".join(problems) or "invalid request"


def blank_to_none(value: str) -> str | None:
    """An empty text field means "not given", as an absent JSON key does."""
    value = value.strip()
    return value or None

"""Failure types caused by data, which no retry changes: whichever activity raises one, the policy that
scheduled it gives up at once (workflows/policies.py adds these to every retry policy).

An exception other than `ApplicationError` reaches Temporal under its class name, so a data error raised
deep in a library (a pydantic `ValidationError`, an asyncpg refusal of a string) is listed by that name.
"""

from __future__ import annotations

DATA_ERRORS: tuple[str, ...] = (
    # Input that does not fit a model: pydantic, the plane's own schemas and sizing.
    "ValidationError",
    "ConfigRefused",
    "ConfigOutOfBounds",
    "SizingError",
    "InvalidLayout",
    # A payload above Temporal's budget (wingsmith/adapters/payloads.py).
    "PayloadTooLarge",
    # Text Postgres or UTF-8 cannot hold, numbers out of a column's range.
    "UnicodeEncodeError",
    "CharacterNotInRepertoireError",
    "UntranslatableCharacterError",
    "StringDataRightTruncationError",
    "NumericValueOutOfRangeError",
    "InvalidTextRepresentationError",
)

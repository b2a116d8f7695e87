"""Free text that ends up in the registry. PostgreSQL text cannot hold NUL (U+0000): a value carrying
one would fail the activity that records it on every retry, so it is stopped where it enters."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

NUL = "\x00"


def _refuse_nul(value: str) -> str:
    if NUL in value:
        raise ValueError("contains a NUL character (\\u0000), which the registry cannot store; remove it")
    return value


def _replace_nul(value: object) -> object:
    return value.replace(NUL, "\ufffd") if isinstance(value, str) else value


# From the API: the caller hears what is wrong (422) and nothing is started.
StorableText = Annotated[str, AfterValidator(_refuse_nul)]
# From a signal, which has no way to answer: the character is replaced so the decision still lands.
SanitizedText = Annotated[str, BeforeValidator(_replace_nul)]

"""The Hugging Face token, read from its reference at call time (an env var name, or `file:<path>`)
through `wingsmith.adapters.secrets`. The token itself is never stored on an object, logged or put in a message."""

from __future__ import annotations

from wingsmith.adapters.secrets import SecretUnavailable, describe_ref, read_secret_ref
from wingsmith.domain.hub.errors import HubTokenUnavailable


def describe(ref: str | None) -> str:
    if not ref:
        return "no token configured (WINGSMITH_HF_TOKEN_REF is unset)"
    return describe_ref(ref).replace("the file ", "the token file ")


def read_token(ref: str | None) -> str | None:
    if not ref:
        return None
    try:
        return read_secret_ref(ref, what="the Hugging Face token", setting="WINGSMITH_HF_TOKEN_REF")
    except SecretUnavailable as exc:
        raise HubTokenUnavailable(str(exc)) from None

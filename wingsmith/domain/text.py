"""Text that ends up in the registry, a Temporal payload or a Kubernetes object.

PostgreSQL text cannot hold NUL (U+0000), and a lone UTF-16 surrogate (U+D800..U+DFFF, which JSON
can carry as an escape such as "\\ud800") cannot be encoded as UTF-8 by asyncpg, by Temporal's
payload converter or by an error handler echoing it. A value carrying either would fail whatever
stores it, on every retry, so it is stopped where it enters: every API string is `StorableText`
(or `bounded(n)` of it), and a refusal is a 422 naming the field.

The maxima below are well under the transports' own limits (Temporal: 2 MB per payload, 4 MB per
gRPC message; Kubernetes: 256 KB of annotations per object), so no single field can reach them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field

NUL = "\x00"
_SURROGATE = re.compile("[\ud800-\udfff]")

# Documented maxima (docs/configuration.md, "Security limits"): names and ids; labels and regions; free prose.
MAX_NAME = 253          # a Kubernetes object name
MAX_LABEL = 63          # a Kubernetes label value
MAX_SOURCE = 512        # a model source: hf:<org>/<name>@<revision> or a Hub URL
MAX_MODEL_NAME = 256    # a served model name, as clients send it
MAX_COMMENT = 4000      # a review comment
MAX_LIST = 64           # items in a list of names (regions, clusters, features, workloads)
MAX_POOLS = 64          # node pools in one cluster's inventory (one per card, node size and free count)
MAX_NODES = 100_000     # nodes in one pool: beyond any cluster Kubernetes supports (5,000 nodes)


def unstorable_reason(value: str) -> str | None:
    """Why this text cannot be stored, or None when it can."""
    if NUL in value:
        return "contains a NUL character (\\u0000), which the registry cannot store; remove it"
    if _SURROGATE.search(value):
        return ("contains a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text and cannot be stored; "
                "send the character itself or its full surrogate pair")
    return None


def _refuse_unstorable(value: str) -> str:
    reason = unstorable_reason(value)
    if reason:
        raise ValueError(reason)
    return value


def _replace_unstorable(value: object) -> object:
    if not isinstance(value, str):
        return value
    # A signal cannot be refused for its length either: keep what fits.
    return _SURROGATE.sub("\ufffd", value.replace(NUL, "\ufffd"))[:MAX_COMMENT]


# From the API: the caller hears what is wrong (422) and nothing is started.
StorableText = Annotated[str, AfterValidator(_refuse_unstorable)]
# From a signal, which has no way to answer: the character is replaced so the decision still lands.
SanitizedText = Annotated[str, BeforeValidator(_replace_unstorable)]

# StorableText with the documented maxima.
NameText = Annotated[str, Field(max_length=MAX_NAME), AfterValidator(_refuse_unstorable)]
LabelText = Annotated[str, Field(max_length=MAX_LABEL), AfterValidator(_refuse_unstorable)]
SourceText = Annotated[str, Field(max_length=MAX_SOURCE), AfterValidator(_refuse_unstorable)]
CommentText = Annotated[str, Field(max_length=MAX_COMMENT), AfterValidator(_refuse_unstorable)]


# What vLLM and OpenAI clients accept as a model id: no spaces or control characters, so a name can
# never split at the frontend, and short enough for any annotation, payload or URL.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$"
ServedModelName = Annotated[str, Field(min_length=1, max_length=MAX_MODEL_NAME, pattern=MODEL_NAME_PATTERN)]


def same_identity(a: str, b: str) -> bool:
    """Whether two names denote the same person: compared after NFKC, trimming and casefolding, so
    "Ops", "ops " and "ｏｐｓ" are all "ops"."""
    return identity_key(a) == identity_key(b)


def identity_key(name: str) -> str:
    return unicodedata.normalize("NFKC", name).strip().casefold()

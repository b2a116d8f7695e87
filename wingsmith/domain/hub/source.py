"""Where a model comes from, as a person types it: `hf:<org>/<name>[@rev]`, a huggingface.co URL
(optionally `/tree/<rev>`), or a bare `<org>/<name>`."""

from __future__ import annotations

import functools
import re
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel

DEFAULT_REVISION = "main"
HUB_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")

# The Hub's own naming rules: letters, digits, '-', '_', '.', at most 96 characters, no '--' or
# '..', and no '-' or '.' at either end.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
# A git ref or commit: no spaces, control characters or the characters git forbids in ref names.
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,254}")
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


class InvalidSource(ValueError):
    """The text does not name a Hugging Face model; the message says what is wrong."""


class ModelSource(BaseModel, frozen=True):
    repo_id: str
    revision: str = DEFAULT_REVISION
    # Whether the person named a revision, or `main` was assumed.
    revision_given: bool = False
    form: Literal["hf", "url", "bare"] = "bare"

    @property
    def pinned(self) -> bool:
        """True when the revision is a full commit sha, so the answer can never change."""
        return bool(COMMIT_SHA.fullmatch(self.revision))

    def __str__(self) -> str:
        return f"hf:{self.repo_id}" + (f"@{self.revision}" if self.revision_given else "")


# Sources are parsed once per text: the API's cached resolve parses the same few over and over, and
# building the (immutable) model was a twentieth of its time. Longer texts, which no one types, are
# parsed each time, so the memo stays small.
_MEMO_LONGEST = 512


def parse_source(text: str) -> ModelSource:
    if not isinstance(text, str) or not text.strip():
        raise InvalidSource("source is empty: expected hf:<org>/<name>[@<revision>], "
                            "https://huggingface.co/<org>/<name>[/tree/<revision>] or <org>/<name>")
    text = text.strip()
    return _parse_memo(text) if len(text) <= _MEMO_LONGEST else _parse(text)


@functools.lru_cache(maxsize=1024)
def _parse_memo(text: str) -> ModelSource:
    return _parse(text)  # a refusal raises, and lru_cache keeps no exceptions


def _parse(text: str) -> ModelSource:
    if text.startswith(("http://", "https://")):
        return _parse_url(text)
    if text.lower().startswith("hf:"):
        body, form = text[3:], "hf"
    elif ":" in text.split("/", 1)[0]:
        scheme = text.split(":", 1)[0]
        raise InvalidSource(
            f"unknown source scheme {scheme!r}: only hf:<org>/<name> and huggingface.co URLs are supported")
    else:
        body, form = text, "bare"
    repo, sep, revision = body.partition("@")
    if sep and not revision:
        raise InvalidSource(f"{text!r} ends with '@' but names no revision")
    return _build(repo, revision if sep else None, form, text)


def _parse_url(text: str) -> ModelSource:
    parts = urlsplit(text)
    if parts.hostname not in HUB_HOSTS:
        raise InvalidSource(f"{parts.hostname!r} is not the Hugging Face Hub: URLs must point at huggingface.co")
    if parts.query or parts.fragment:
        raise InvalidSource("the URL carries a query or fragment; give the repository URL "
                            "https://huggingface.co/<org>/<name>[/tree/<revision>]")
    segments = [s for s in parts.path.split("/") if s]
    if segments and segments[0] in ("datasets", "spaces"):
        raise InvalidSource(f"{text!r} is a {segments[0][:-1]}, not a model")
    if len(segments) < 2:
        raise InvalidSource(f"{text!r} names no <org>/<name> repository")
    repo = "/".join(segments[:2])
    rest = segments[2:]
    if not rest:
        return _build(repo, None, "url", text)
    if rest[0] == "tree" and len(rest) >= 2:
        # Branch names may contain '/', and the Hub links `refs/pr/1` either raw or %2F-encoded.
        return _build(repo, unquote("/".join(rest[1:])), "url", text)
    raise InvalidSource(f"unsupported Hub URL path /{'/'.join(rest)}: expected the repository URL, "
                        "optionally followed by /tree/<revision>")


def _build(repo: str, revision: str | None, form: str, text: str) -> ModelSource:
    pieces = repo.split("/")
    if len(pieces) != 2:
        raise InvalidSource(f"{text!r}: the repository must be <org>/<name> "
                            f"(got {len(pieces)} part{'s' if len(pieces) != 1 else ''})")
    for label, piece in zip(("organisation", "model name"), pieces, strict=True):
        if not piece:
            raise InvalidSource(f"{text!r}: the {label} is empty")
        if not _NAME.fullmatch(piece) or "--" in piece or ".." in piece:
            raise InvalidSource(f"{text!r}: {label} {piece!r} is not a valid Hub name (letters, digits, "
                                "'-', '_', '.'; at most 96 characters; no '--' or '..'; "
                                "starting and ending with a letter or digit)")
    if revision is not None:
        if not _REVISION.fullmatch(revision) or ".." in revision or revision.endswith((".lock", "/")) \
                or "//" in revision:
            raise InvalidSource(f"{text!r}: revision {revision!r} is not a valid branch, tag or commit")
    return ModelSource(repo_id=repo, revision=revision or DEFAULT_REVISION,
                       revision_given=revision is not None, form=form)

"""Typed Hub failures. `retryable` tells a caller (a Temporal activity, the API) whether trying again
later can help. Messages never carry a token: they are built from repo ids, revisions and statuses."""

from __future__ import annotations


class HubError(Exception):
    retryable: bool = False

    def __init__(self, message: str, *, repo_id: str | None = None, revision: str | None = None):
        super().__init__(message)
        self.message = message
        self.repo_id = repo_id
        self.revision = revision


class RepoNotFound(HubError):
    """No such model, or it is private and the token cannot see it."""


class RevisionNotFound(HubError):
    """The repository exists, the branch, tag or commit does not."""


class GatedRepo(HubError):
    """The model needs its owners' approval and the configured token does not have it."""


class HubFileTooLarge(HubError):
    """A file the plane reads into the proposal (config.json, the model card) is above its limit: no
    model needs one that big, and it would not fit a workflow payload (wingsmith/adapters/payloads.py)."""


class ConfigOutOfBounds(HubError):
    """config.json has a field outside the plane's schema (wingsmith/domain/hub/config_schema.py): a wrong type, a
    number out of range, a document too deep or too big. Named by `field`; no retry changes a commit."""

    def __init__(self, message: str, *, field: str | None = None, **kw):
        super().__init__(message, **kw)
        self.field = field


class HubAnswerInvalid(HubError):
    """The Hub's answer (model info, a card's metadata) does not have the shape the Hub documents: a
    hostile or broken server. Named, never computed on; trying again gets the same answer."""


class HubTokenUnavailable(HubError):
    """A token reference is configured but names nothing readable (an unset env var, a missing file)."""


class HubUnavailable(HubError):
    """5xx answers, timeouts or connection failures that outlasted the retries."""
    retryable = True


class HubRateLimited(HubError):
    """The Hub kept answering 429, or asked for a longer wait than we are willing to block for."""
    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kw):
        super().__init__(message, **kw)
        self.retry_after = retry_after

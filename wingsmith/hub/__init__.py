"""Hugging Face Hub adapter: parse a model source, resolve it into an artifact proposal.

The resolver (and with it `huggingface_hub`) loads on first use, so the proposal's model, which the
artifact workflow's contract carries, can be imported without an I/O library (tests/test_layers.py)."""

from typing import TYPE_CHECKING, Any

from wingsmith.hub.errors import (
    ConfigOutOfBounds,
    GatedRepo,
    HubAnswerInvalid,
    HubError,
    HubFileTooLarge,
    HubRateLimited,
    HubTokenUnavailable,
    HubUnavailable,
    RepoNotFound,
    RevisionNotFound,
)
from wingsmith.hub.proposal import ArtifactProposal
from wingsmith.hub.source import InvalidSource, ModelSource, parse_source

__all__ = ["ArtifactProposal", "ConfigOutOfBounds", "GatedRepo", "HubAnswerInvalid", "HubError", "HubFileTooLarge",
           "HubRateLimited", "HubTokenUnavailable",
           "HubUnavailable", "InvalidSource", "MissingConfig", "ModelSource", "RepoNotFound", "Resolver", "RetryPolicy",
           "RevisionNotFound", "parse_source"]

if TYPE_CHECKING:
    from wingsmith.hub.resolver import MissingConfig, Resolver, RetryPolicy

_RESOLVER_NAMES = ("MissingConfig", "Resolver", "RetryPolicy")


def __getattr__(name: str) -> Any:
    if name in _RESOLVER_NAMES:
        from wingsmith.hub import resolver
        return getattr(resolver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

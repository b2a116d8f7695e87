"""Hugging Face Hub adapter: parse a model source, resolve it into an artifact proposal."""

from wingsmith.hub.errors import (
    GatedRepo,
    HubError,
    HubFileTooLarge,
    HubRateLimited,
    HubTokenUnavailable,
    HubUnavailable,
    RepoNotFound,
    RevisionNotFound,
)
from wingsmith.hub.proposal import ArtifactProposal
from wingsmith.hub.resolver import MissingConfig, Resolver, RetryPolicy
from wingsmith.hub.source import InvalidSource, ModelSource, parse_source

__all__ = ["ArtifactProposal", "GatedRepo", "HubError", "HubFileTooLarge", "HubRateLimited", "HubTokenUnavailable",
           "HubUnavailable", "InvalidSource", "MissingConfig", "ModelSource", "RepoNotFound", "Resolver", "RetryPolicy",
           "RevisionNotFound", "parse_source"]

"""A model on the Hugging Face Hub, as data: a model source parsed, the facts of a resolved commit
(config, weights) and the artifact proposal they make, and the ways resolving can fail. Resolving
itself (through `huggingface_hub`) is wingsmith/adapters/hub/."""

from wingsmith.domain.hub.errors import (
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
from wingsmith.domain.hub.proposal import ArtifactProposal
from wingsmith.domain.hub.source import InvalidSource, ModelSource, parse_source

__all__ = ["ArtifactProposal", "ConfigOutOfBounds", "GatedRepo", "HubAnswerInvalid", "HubError", "HubFileTooLarge",
           "HubRateLimited", "HubTokenUnavailable",
           "HubUnavailable", "InvalidSource", "ModelSource", "RepoNotFound",
           "RevisionNotFound", "parse_source"]

"""Workflow ids and search-attribute keys in one place: the starters, the workflows (children,
signals to each other) and the API build ids here, and every workflow upserts its own attributes
with these keys. The attribute names and types match `wingsmith.config.SEARCH_ATTRIBUTES`, which
registers them on the server."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():  # one copy of the models inside and outside the sandbox
    from wingsmith.artifacts import artifact_workflow_id

STAGE = SearchAttributeKey.for_keyword("WingsmithStage")
MODEL = SearchAttributeKey.for_keyword("WingsmithModel")
SHA = SearchAttributeKey.for_keyword("WingsmithSha")
WORKLOAD = SearchAttributeKey.for_keyword("WingsmithWorkload")
CLUSTERS = SearchAttributeKey.for_keyword_list("WingsmithCluster")

__all__ = ["CLUSTERS", "MODEL", "SHA", "STAGE", "WORKLOAD", "artifact_workflow_id", "artifact_workflow_id_of",
           "cluster_rollout_workflow_id", "endpoint_workflow_id", "upgrade_id", "workload_workflow_id"]


def artifact_workflow_id_of(artifact: str) -> str:
    """From an artifact id (`<org>/<name>@<sha>`)."""
    return f"artifact/{artifact}"


def workload_workflow_id(workload_id: str) -> str:
    return f"workload/{workload_id}"


def cluster_rollout_workflow_id(workload_id: str, cluster: str, revision: int = 0) -> str:
    """Revision n > 0 (a version an upgrade brought up) rolls out under its own id, so the old
    version's heals and the new version's rollout never collide."""
    return f"workload/{workload_id}/cluster/{cluster}" + (f"/r{revision}" if revision else "")


def upgrade_id(workload_id: str, revision: int) -> str:
    """The n-th upgrade of a workload (its target revision): what the events and status call it."""
    return f"workload/{workload_id}/upgrade/{revision}"


def endpoint_workflow_id(name: str) -> str:
    return f"endpoint/{name}"

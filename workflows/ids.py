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
           "cluster_rollout_workflow_id", "endpoint_workflow_id", "workload_workflow_id"]


def artifact_workflow_id_of(artifact: str) -> str:
    """From an artifact id (`<org>/<name>@<sha>`)."""
    return f"artifact/{artifact}"


def workload_workflow_id(workload_id: str) -> str:
    return f"workload/{workload_id}"


def cluster_rollout_workflow_id(workload_id: str, cluster: str) -> str:
    return f"workload/{workload_id}/cluster/{cluster}"


def endpoint_workflow_id(name: str) -> str:
    return f"endpoint/{name}"

"""Workflow ids and search-attribute keys in one place: the starters, the workflows (children,
signals to each other) and the API build ids here, and every workflow upserts its own attributes
with these keys. The attribute names and types match `wingsmith.domain.config.SEARCH_ATTRIBUTES`, which
registers them on the server."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

STAGE = SearchAttributeKey.for_keyword("WingsmithStage")
MODEL = SearchAttributeKey.for_keyword("WingsmithModel")
SHA = SearchAttributeKey.for_keyword("WingsmithSha")
WORKLOAD = SearchAttributeKey.for_keyword("WingsmithWorkload")
CLUSTERS = SearchAttributeKey.for_keyword_list("WingsmithCluster")

def evidence_tag(catalog_version: str) -> str:
    """`recipes-<content hash>` of a catalog version: names a draft opened for new recipe evidence."""
    return "recipes-" + catalog_version.rsplit(".", 1)[-1]


def artifact_id(repo_id: str, sha: str, catalog_version: str | None = None) -> str:
    """`<org>/<name>@<sha>`; a draft the watch opened because the recipe catalog changed the model's
    evidence (same commit) is `<org>/<name>@<sha>+recipes-<catalog hash>`, a review of its own."""
    base = f"{repo_id}@{sha}"
    return f"{base}+{evidence_tag(catalog_version)}" if catalog_version else base


def artifact_workflow_id(repo_id: str, sha: str, catalog_version: str | None = None) -> str:
    return f"artifact/{artifact_id(repo_id, sha, catalog_version)}"


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


def autoscaler_workflow_id(workload_id: str) -> str:
    """The one autoscaling loop of a workload with a policy."""
    return f"autoscaler/{workload_id}"

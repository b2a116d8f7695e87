"""The member cluster preflight's contract: check one registered cluster (`POST /v1/clusters`, `POST
/v1/clusters/{name}/check`, `wingsmith clusters check`, the console's cluster page), on the kube task queue,
and answer its checklist (wingsmith/domain/member_clusters.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from wingsmith.domain.kube_ref import KubeconfigRef
from wingsmith.domain.member_clusters import Preflight

WORKFLOW = "ClusterCheckWorkflow"
ACTIVITY_CHECK_CLUSTER = "check_cluster"  # ClusterCheckInput -> Preflight (activities/cluster_check.py)
# What the checks themselves may take on the cluster (wingsmith/adapters/kube/preflight.py stops starting checks then).
CHECK_SECONDS = 25.0


def cluster_check_workflow_id(cluster: str, nonce: str) -> str:
    """`cluster-check/<cluster>/<nonce>`: each check of a cluster is a run of its own in the Temporal UI."""
    return f"cluster-check/{cluster}/{nonce}"


def cluster_check_summary(cluster: str) -> tuple[str, str]:
    return (f"Preflight of cluster {cluster}",
            "Checks, on the kube task queue, what the plane needs of this member cluster: its API answers, the "
            "Dynamo CRDs and operator, every permission the plane uses (SelfSubjectAccessReview), the deploy "
            "namespace and the Hub token Secret, GPU nodes. Reads only.")


class ClusterCheckInput(BaseModel):
    cluster: str = Field(min_length=1)
    kubeconfig: KubeconfigRef
    namespace: str = Field(min_length=1, max_length=63)
    hf_token_secret: str | None = Field(default=None, max_length=253)
    kube_task_queue: str
    check_seconds: float = Field(default=CHECK_SECONDS, gt=0, le=120)


__all__ = ["ACTIVITY_CHECK_CLUSTER", "CHECK_SECONDS", "WORKFLOW", "ClusterCheckInput", "Preflight",
           "cluster_check_summary", "cluster_check_workflow_id"]

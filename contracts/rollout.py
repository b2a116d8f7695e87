"""The cluster rollout's contract (`workload/<id>/cluster/<name>`, a child of the workload
workflow): one rollout, or one teardown, of a workload's deployment on one cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from wingsmith.dynamo.rollout_spec import RolloutSpec
from wingsmith.kube_ref import KubeconfigRef

WORKFLOW = "ClusterRolloutWorkflow"
QUERY_PROGRESS = "progress"  # -> str: where the rollout is

# Failures no retry can fix; everything else retries with backoff.
FINAL_ERRORS = ["InvalidRollout", "SchemaRejected", "Forbidden", "Unauthorized", "BadRequest", "PodCrashLooping",
                "ImagePullFailed", "OutOfMemory", "DeploymentFailed", "DeploymentSuperseded", "DeploymentMissing",
                "ReadyDeadlineExceeded", "Unschedulable", "KubeconfigMissing", "KubeconfigInvalid"]

class ClusterRolloutInput(BaseModel):
    mode: Literal["apply", "delete"]
    workload_id: str
    cluster: str
    revision: int = 0  # which version on this cluster (an upgrade runs two side by side)
    kubeconfig: KubeconfigRef
    namespace: str
    spec: RolloutSpec | None = None  # apply only
    weight_bytes: int | None = None
    kube_task_queue: str
    ready_deadline_seconds: float | None = None
    poll_seconds: float = 2.0
    unschedulable_grace_seconds: float = 120


class ClusterRolloutResult(BaseModel):
    cluster: str
    dgd_name: str
    namespace: str
    state: Literal["serving", "deleted"]
    replicas: int = 0
    generation: int | None = None
    spec_hash: str | None = None
    frontend_url: str | None = None

"""The cluster rollout's contract (`workload/<id>/cluster/<name>`, a child of the workload
workflow): one rollout, or one teardown, of a workload's deployment on one cluster; and the names and
payloads of the activities it calls (activities/rollout.py; the deployment rows, which the workload's
healing writes too, through activities/workload.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from wingsmith.domain.dynamo.rollout_spec import RolloutSpec
from wingsmith.domain.kube_ref import KubeconfigRef

WORKFLOW = "ClusterRolloutWorkflow"
QUERY_PROGRESS = "progress"  # -> str: where the rollout is

# Its activities (names recorded in histories: never rename one).
ACTIVITY_APPLY = "rollout.apply"  # ApplyInput -> ApplyOutput
ACTIVITY_WAIT_READY = "rollout.wait_ready"  # WaitReadyInput -> WaitReadyOutput
ACTIVITY_PROBE_FRONTEND = "rollout.probe_frontend"  # ProbeFrontendInput -> ProbeFrontendOutput
ACTIVITY_DELETE = "rollout.delete"  # DeleteInput -> DeleteOutput
ACTIVITY_RECORD_DEPLOYMENT = "workload.record_deployment"  # DeploymentRecord -> None

# The ApplicationError types of its activities' failures (recorded in histories, shown in events and
# counted by the metrics: never rename one). Raised by activities/rollout.py itself:
ERROR_INVALID_ROLLOUT = "InvalidRollout"  # the spec does not render into a DynamoGraphDeployment
# A pool's engine command asks for other ranks than the GPUs its pods reserve (wingsmith.domain.dynamo.ranks):
# the DGD would never start. Raised non-retryable by the apply activity before anything is applied.
ERROR_RANKS_MISMATCH = "RanksMismatch"
ERROR_INVALID_INPUT = "InvalidInput"  # a probe given neither a URL nor a deployment to find one
ERROR_DEPLOYMENT_MISSING = "DeploymentMissing"  # (also by wingsmith/adapters/kube/dgd.py: no DGD, no frontend URL)
ERROR_DEPLOYMENT_SUPERSEDED = "DeploymentSuperseded"  # another apply moved the generation on while waiting
ERROR_DEPLOYMENT_FAILED = "DeploymentFailed"  # the operator reports that reconciling it failed
ERROR_UNSCHEDULABLE = "Unschedulable"  # a pod found no node for the grace period
ERROR_READY_DEADLINE_EXCEEDED = "ReadyDeadlineExceeded"
ERROR_FRONTEND_NOT_SERVING = "FrontendNotServing"  # the frontend did not list the model in time
# ... and passed on as the adapters and the readiness rules name them: the Kubernetes API's refusals
# (wingsmith/adapters/kube/errors.py), a kubeconfig that cannot be read (wingsmith/adapters/kube/kubeconfig.py),
# and pods that will never become ready (wingsmith/domain/dynamo/readiness.py).
ERROR_SCHEMA_REJECTED = "SchemaRejected"
ERROR_FORBIDDEN = "Forbidden"
ERROR_UNAUTHORIZED = "Unauthorized"
ERROR_BAD_REQUEST = "BadRequest"
ERROR_KUBECONFIG_MISSING = "KubeconfigMissing"
ERROR_KUBECONFIG_INVALID = "KubeconfigInvalid"
ERROR_POD_CRASH_LOOPING = "PodCrashLooping"
ERROR_IMAGE_PULL_FAILED = "ImagePullFailed"
ERROR_OUT_OF_MEMORY = "OutOfMemory"

# Failures no retry can fix; everything else retries with backoff.
FINAL_ERRORS = [ERROR_INVALID_ROLLOUT, ERROR_SCHEMA_REJECTED, ERROR_FORBIDDEN, ERROR_UNAUTHORIZED, ERROR_BAD_REQUEST,
                ERROR_POD_CRASH_LOOPING, ERROR_IMAGE_PULL_FAILED, ERROR_OUT_OF_MEMORY, ERROR_DEPLOYMENT_FAILED,
                ERROR_DEPLOYMENT_SUPERSEDED, ERROR_DEPLOYMENT_MISSING, ERROR_READY_DEADLINE_EXCEEDED,
                ERROR_UNSCHEDULABLE, ERROR_KUBECONFIG_MISSING, ERROR_KUBECONFIG_INVALID]


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
    # The deployment serves now and only its replica count changes: it stays routed (its row stays
    # `serving`) until the new count serves, so a scale never takes an endpoint's backend away.
    keep_routed: bool = False


class ClusterRolloutResult(BaseModel):
    cluster: str
    dgd_name: str
    namespace: str
    state: Literal["serving", "deleted"]
    replicas: int = 0
    generation: int | None = None
    spec_hash: str | None = None
    frontend_url: str | None = None


# --- its activities' payloads ----------------------------------------------------------------------


class ApplyInput(BaseModel):
    kubeconfig: KubeconfigRef
    spec: RolloutSpec


class ApplyOutput(BaseModel):
    name: str
    namespace: str
    uid: str
    generation: int
    resource_version: str
    spec_hash: str | None = Field(default=None, description="the spec-hash annotation applied (None: older worker)")


class WaitReadyInput(BaseModel):
    kubeconfig: KubeconfigRef
    name: str
    namespace: str
    generation: int = Field(ge=1, description="the generation `apply` returned")
    weight_bytes: int | None = Field(default=None, ge=0, description="scales the deadline")
    deadline_seconds: float | None = Field(default=None, gt=0, description="overrides the scaled deadline")
    poll_seconds: float = Field(default=5.0, gt=0)
    unschedulable_grace_seconds: float = Field(
        default=120, ge=0, description="how long a pod may find no node before the cluster is given up on "
                                       "(a cluster autoscaler may add one meanwhile)")


class WaitReadyOutput(BaseModel):
    name: str
    namespace: str
    generation: int
    state: str
    waited_seconds: float
    polls: int
    pods_ready: int
    pods_total: int


class ProbeFrontendInput(BaseModel):
    url: str | None = Field(default=None, description="frontend base URL; None: ask the cluster")
    kubeconfig: KubeconfigRef | None = None
    name: str | None = None
    namespace: str = "default"
    served_model_name: str
    timeout_seconds: float = Field(default=600.0, gt=0)
    poll_seconds: float = Field(default=2.0, gt=0)


class ProbeFrontendOutput(BaseModel):
    url: str
    models: list[str]
    attempts: int
    waited_seconds: float


class DeleteInput(BaseModel):
    kubeconfig: KubeconfigRef
    name: str
    namespace: str
    timeout_seconds: float = Field(default=900.0, gt=0)
    poll_seconds: float = Field(default=1.0, gt=0)


class DeleteOutput(BaseModel):
    existed: bool
    waited_seconds: float


class DeploymentRecord(BaseModel):
    workload_id: str
    cluster: str
    revision: int = 0
    dgd_name: str
    namespace: str
    replicas: int
    state: str
    frontend_url: str | None = None
    detail: dict = {}
    source: str
    step: str

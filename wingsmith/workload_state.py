"""The models the workload workflow exchanges with the API: its input, its state (carried across
continue-as-new), its updates and its status query."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from wingsmith.workloads import WorkloadPlan

Stage = Literal["planning", "placing", "rolling_out", "serving", "scaling", "deleting", "deleted", "failed"]


class ClusterState(BaseModel):
    cluster: str
    replicas: int = 0
    state: Literal["pending", "rolling_out", "serving", "failed", "deleting", "deleted"] = "pending"
    dgd_name: str | None = None
    frontend_url: str | None = None
    error: str | None = None


class WorkloadState(BaseModel):
    stage: Stage = "planning"
    clusters: dict[str, ClusterState] = Field(default_factory=dict)
    excluded: list[str] = Field(default_factory=list, description="clusters that failed and take no replicas")
    placement_revision: int = 0
    subscribers: list[str] = Field(default_factory=list, description="endpoint workflows following this workload")
    failure: str | None = None
    events: list[str] = Field(default_factory=list)


class WorkloadWorkflowInput(BaseModel):
    plan: WorkloadPlan
    requested_by: str
    kube_task_queue: str
    ready_deadline_seconds: float | None = None
    poll_seconds: float = 2.0
    unschedulable_grace_seconds: float = 120
    drain_grace_seconds: int = 300
    history_limit: int | None = Field(default=None, ge=10, description="tests only: continue as new past this "
                                      "many events (otherwise when the server suggests it)")
    resume: WorkloadState | None = None  # set when continuing as new


class ScaleRequest(BaseModel):
    replicas: int = Field(ge=1, le=256)
    requested_by: str = "unknown"


class DeleteRequest(BaseModel):
    requested_by: str = "unknown"


class WorkloadStatus(BaseModel):
    workload_id: str
    stage: Stage
    replicas: int
    served_model_name: str
    clusters: list[ClusterState]
    failure: str | None = None
    events: list[str] = Field(default_factory=list)

    @property
    def serving_replicas(self) -> int:
        return sum(c.replicas for c in self.clusters if c.state == "serving")

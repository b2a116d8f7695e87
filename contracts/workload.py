"""The workload workflow's contract (`workload/<id>`): its input, its state (carried across
continue-as-new), its updates, signals and status query, their names, the `ApplicationError`
types it raises, and the names and payloads of the activities it calls (activities/workload.py,
activities/observe.py register them under these names; the workflow calls them by name)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from contracts.conditions import Condition, Event
from contracts.ids import MODEL, SHA, STAGE, WORKLOAD
from contracts.upgrade import UpgradeStatus
from wingsmith.domain.endpoints import BackendDrained as BackendDrained  # the backend_drained signal's payload
from wingsmith.domain.endpoints import (
    EndpointRef as EndpointRef,  # the subscribe, unsubscribe, drained signals' payload
)
from wingsmith.domain.kube_ref import KubeconfigRef
from wingsmith.domain.placement.models import ClusterInfo, ClusterInventory, PlacementDecision, PlacementPlan
from wingsmith.domain.teams import DEFAULT_TEAM
from wingsmith.domain.workloads import WorkloadPlan

# The workflow's type name and its handlers' names: clients start and call it by these (the upgrade
# updates are named in contracts.upgrade).
WORKFLOW = "WorkloadWorkflow"
QUERY_STATUS = "status"  # -> WorkloadStatus
UPDATE_SCALE = "scale"  # ScaleRequest -> WorkloadStatus
UPDATE_DELETE = "delete"  # DeleteRequest -> WorkloadStatus
SIGNAL_SUBSCRIBE = "subscribe"  # EndpointRef: an endpoint follows this workload
SIGNAL_UNSUBSCRIBE = "unsubscribe"  # EndpointRef
SIGNAL_DRAINED = "drained"  # EndpointRef: that endpoint no longer routes here, the delete may go on
SIGNAL_BACKEND_DRAINED = "backend_drained"  # BackendDrained: one cluster drained, the scale-down may go on

# Why an update is refused, and how a workload fails (`ApplicationError` types).
NOT_SCALABLE = "NotScalable"
ALREADY_DELETED = "AlreadyDeleted"
WORKLOAD_FAILED = "WorkloadFailed"  # could not be placed and served: rolled back

# Its activities (names recorded in histories: never rename one).
ACTIVITY_LIST_CLUSTERS = "workload.list_clusters"  # NoInput -> ClusterTargets
ACTIVITY_PLACE = "workload.place"  # PlaceInput -> PlacementDecision
ACTIVITY_RECORD = "workload.record"  # WorkloadRecord -> None
ACTIVITY_RECORD_PLACEMENT = "workload.record_placement"  # PlacementRecord -> None
ACTIVITY_RECORD_HEAL = "workload.record_heal"  # HealRecord -> None
ACTIVITY_OBSERVE = "workload.observe"  # ObserveDeploymentInput -> wingsmith.domain.reconcile.Observation
# (the deployment rows: contracts.rollout.ACTIVITY_RECORD_DEPLOYMENT; cluster inventories:
# contracts.inventory.ACTIVITY_READ_INVENTORY)

# `degraded`: what was observed is less than what was asked (a deployment missing, unready or
# unreachable, or replicas that could not be placed again); the clusters say which and why.
Stage = Literal["planning", "placing", "rolling_out", "serving", "degraded", "scaling", "deleting", "deleted",
                "failed"]


class ClusterState(BaseModel):
    cluster: str
    replicas: int = 0
    state: Literal["pending", "rolling_out", "serving", "degraded", "failed", "deleting", "deleted"] = "pending"
    dgd_name: str | None = None
    revision: int = Field(default=0, description="the version its DGD runs (bumped by each upgrade)")
    frontend_url: str | None = None
    error: str | None = Field(default=None, description="why it failed, or what the watch saw wrong (degraded)")
    # What the plane applied, which the watch compares the live object with.
    generation: int | None = None
    spec_hash: str | None = None
    unhealthy_since: datetime | None = Field(default=None, description="first look that found it wrong")
    fault_at: datetime | None = Field(default=None, description="when the cluster says the fault happened "
                                      "(deletionTimestamp, the edit's time); None when it cannot say (gone)")
    last_ok_at: datetime | None = Field(default=None, description="the last look (or rollout) that found it "
                                        "serving as applied")
    fault_after: datetime | None = Field(default=None, description="when the cluster cannot say when the fault "
                                         "happened: after this (the last look that found it well, `last_ok_at`), "
                                         "before `unhealthy_since`")
    drift: str | None = Field(default=None, description="an edit outside the plane, left in place (drift: report)")


class WatchSettings(BaseModel):
    """How a serving workload watches its clusters (see wingsmith/domain/reconcile.py for the verdicts)."""

    status_seconds: float = Field(default=10, gt=0, description="between looks at each DGD's metadata and status")
    probe_seconds: float = Field(default=30, gt=0, description="between probes of each frontend's /v1/models")
    report_seconds: float = Field(default=300, gt=0, description="a look with no news answers after this long "
                                  "(a cluster with a problem: after status_seconds, so its grace is counted)")
    grace_seconds: float = Field(default=120, ge=0, description="how long a cluster may stay unready or "
                                 "unreachable before its replicas are placed elsewhere")
    silence_seconds: float = Field(default=60, gt=0, description="looks without any answer this long (the "
                                   "cluster's API hangs, or the plane's watch worker is gone) show the cluster "
                                   "unreachable, and its grace starts")
    place_again_seconds: float = Field(default=30, gt=0, description="replicas a heal could not place are tried "
                                       "again after this, doubling up to 10 min")
    looks_per_run: int = Field(default=360, ge=1, description="answered looks before continuing as new, so a workload "
                               "watched for months keeps a short history (Temporal may suggest it sooner)")


class WorkloadState(BaseModel):
    stage: Stage = "planning"
    clusters: dict[str, ClusterState] = Field(default_factory=dict)
    excluded: list[str] = Field(default_factory=list, description="clusters that failed and take no replicas")
    placement_revision: int = 0
    subscribers: list[str] = Field(default_factory=list, description="endpoint workflows following this workload")
    failure: str | None = None
    events: list[str] = Field(default_factory=list, description="prose, kept for one release: read `timeline`")
    timeline: list[Event] = Field(default_factory=list, description="what happened, each with a reason")
    conditions: list[Condition] = Field(default_factory=list)
    leftovers: list[str] = Field(default_factory=list, description="clusters whose replicas moved while they could "
                                 "not be reached: their old DGD is removed when they answer again")
    heals: int = 0
    upgrade: UpgradeStatus | None = Field(default=None, description="the running or the last upgrade")
    upgrades: int = Field(default=0, description="upgrades started, which numbers them")


class WorkloadWorkflowInput(BaseModel):
    plan: WorkloadPlan
    requested_by: str
    team: str = Field(default=DEFAULT_TEAM, description="the team that owns it: its creator's")
    kube_task_queue: str
    ready_deadline_seconds: float | None = None
    poll_seconds: float = 2.0
    unschedulable_grace_seconds: float = 120
    drain_grace_seconds: int = 300
    history_limit: int | None = Field(default=None, ge=10, description="tests only: continue as new past this "
                                      "many events (otherwise when the server suggests it)")
    watch: WatchSettings = Field(default_factory=WatchSettings)
    resume: WorkloadState | None = None  # set when continuing as new


class ScaleRequest(BaseModel):
    replicas: int = Field(ge=1, le=256)
    requested_by: str = "unknown"
    team: str = DEFAULT_TEAM


class DeleteRequest(BaseModel):
    requested_by: str = "unknown"
    team: str = DEFAULT_TEAM


class WorkloadStatus(BaseModel):
    workload_id: str
    stage: Stage
    replicas: int
    served_model_name: str
    clusters: list[ClusterState]
    failure: str | None = None
    events: list[str] = Field(default_factory=list, description="deprecated, kept for one release: the same as "
                              "`timeline`, as prose")
    conditions: list[Condition] = Field(default_factory=list, description="Available, Progressing, Degraded, "
                                        "UpgradeInProgress: status, reason, message, last transition")
    timeline: list[Event] = Field(default_factory=list, description="the last events, each with a reason and detail")
    upgrade: UpgradeStatus | None = None
    artifact_id: str | None = Field(default=None, description="the artifact it runs (an upgrade changes it)")
    team: str = Field(default=DEFAULT_TEAM, description="the team that owns it")

    @property
    def serving_replicas(self) -> int:
        return sum(c.replicas for c in self.clusters if c.state == "serving")


def search_attributes(params: WorkloadWorkflowInput, stage: str = "planning") -> list[SearchAttributePair[Any]]:
    """What the workload is found by: its model, the commit, its id and its stage."""
    repo_id = params.plan.artifact_id.rsplit("@", 1)[0]
    return [SearchAttributePair(STAGE, stage), SearchAttributePair(MODEL, repo_id),
            SearchAttributePair(SHA, params.plan.artifact_sha), SearchAttributePair(WORKLOAD, params.plan.workload_id)]


def start_search_attributes(params: WorkloadWorkflowInput) -> TypedSearchAttributes:
    return TypedSearchAttributes(search_attributes(params))


# --- its activities' payloads ----------------------------------------------------------------------


class ClusterTarget(BaseModel):
    """Where and how to reach one registered cluster: references only, never credentials."""
    info: ClusterInfo
    kubeconfig: KubeconfigRef
    frontend_base_url: str = ""
    manual_inventory: ClusterInventory | None = None


class ClusterTargets(BaseModel):
    clusters: list[ClusterTarget]


class NoInput(BaseModel):
    pass


class PlaceInput(BaseModel):
    plan: PlacementPlan
    inventories: list[ClusterInventory]
    clusters: list[ClusterInfo]


class WorkloadRecord(BaseModel):
    workload_id: str
    artifact_id: str
    spec: dict
    state: str
    workflow_id: str
    requested_by: str
    step: str
    detail: dict = {}
    team: str = DEFAULT_TEAM


class PlacementRecord(BaseModel):
    workload_id: str
    revision: int
    decision: PlacementDecision
    workflow_id: str


class HealRecord(BaseModel):
    workload_id: str
    workflow_id: str
    step: str
    cluster: str
    action: str
    problem: str = "other"  # wingsmith.domain.reconcile.Problem
    cause: str
    seconds: float
    outcome: str
    # When the cluster says the fault happened (None: it cannot say, e.g. the object is gone), else the
    # last look that found it well (the fault came after it), when the plane saw it, when it served again.
    fault_at: datetime | None = None
    fault_after: datetime | None = None
    seen_at: datetime | None = None
    served_at: datetime | None = None


class ObserveDeploymentInput(BaseModel):
    cluster: str = Field(min_length=1)
    kubeconfig: KubeconfigRef
    name: str = Field(min_length=1, description="the DGD")
    namespace: str = Field(min_length=1)
    served_model_name: str | None = Field(default=None, description="probe the frontend for this name; None: skip")
    probe_timeout_seconds: float = Field(default=3.0, gt=0, le=60)
    known: str | None = Field(default=None, description="the news key the workflow last acted on; None: answer "
                              "after the first read")
    known_at: datetime | None = Field(default=None, description="when the read behind `known` started: a read "
                                      "older than that (shared with other looks) predates what the workflow "
                                      "knows, and is not taken")
    status_seconds: float = Field(default=10, gt=0, le=3600)
    probe_seconds: float = Field(default=30, gt=0, le=3600)
    report_seconds: float = Field(default=300, gt=0, le=86400, description="answer after this long even "
                                  "without news")


def last_heard(details: object) -> datetime | None:
    """The time a lost observation last read its cluster, from its last heartbeat's details (the observe
    activity heartbeats that time as an ISO string; empty before its first read)."""
    if isinstance(details, (list, tuple)) and details and isinstance(details[0], str) and details[0]:
        try:
            return datetime.fromisoformat(details[0])
        except ValueError:
            return None
    return None

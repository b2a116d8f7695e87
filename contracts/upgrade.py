"""The upgrade's contract: what a person (or a `follow: auto` approval) asks of a workload's workflow
(the `upgrade` update and the pause, resume and abort updates), what the upgrade reports, and the
`ApplicationError` types its refusals carry, and the names and payloads of the activities it calls
(activities/upgrade.py). The traffic analysis itself is domain (wingsmith.domain.upgrade)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from wingsmith.domain.gateway.traffic import BackendCounters
from wingsmith.domain.teams import DEFAULT_TEAM
from wingsmith.domain.text import MAX_LIST, CommentText, NameText
from wingsmith.domain.upgrade import StepVerdict, UpgradeThresholds
from wingsmith.domain.workloads import WorkloadPlan

# The workload workflow's upgrade updates (the workflow's type name is contracts.workload.WORKFLOW).
UPDATE_UPGRADE = "upgrade"  # UpgradeRequest -> UpgradeStatus
UPDATE_PAUSE = "pause_upgrade"  # UpgradeControl -> UpgradeStatus
UPDATE_RESUME = "resume_upgrade"
UPDATE_ABORT = "abort_upgrade"

# The upgrade's activities (names recorded in histories: never rename one).
ACTIVITY_PLAN = "upgrade.plan"  # PlanUpgradeInput -> PlanUpgradeOutput
ACTIVITY_SET_SPLIT = "upgrade.set_split"  # SplitInput -> None
ACTIVITY_READ_COUNTERS = "upgrade.read_counters"  # CountersInput -> CountersOutput
ACTIVITY_RECORD = "upgrade.record"  # UpgradeEvent -> None

# Why an upgrade is refused (the update fails with one of these `ApplicationError` types).
UPGRADE_RUNNING = "UpgradeRunning"  # another upgrade runs or is being planned
NOT_SERVING = "NotServing"  # the workload does not serve (yet, or any more)
INVALID_STEPS = "InvalidSteps"
OTHER_REPOSITORY = "OtherRepository"
SAME_ARTIFACT = "SameArtifact"
ARTIFACT_NOT_UPGRADABLE = "ArtifactNotUpgradable"  # e.g. not approved (the registry's answer)
NOT_UPGRADABLE = "NotUpgradable"  # the plan refused it without naming why
UPGRADE_NOT_PLANNED = "UpgradeNotPlanned"  # planning failed (the registry did not answer)
# ... and why a pause, resume or abort is.
NO_UPGRADE = "NoUpgrade"
ALREADY_PAUSED = "AlreadyPaused"
NOT_PAUSED = "NotPaused"
UPGRADE_FINISHING = "UpgradeFinishing"  # too late to pause or abort: it is ending
# The refusals that mean "this request is wrong" (HTTP 422), not "not now" (HTTP 409).
INVALID_UPGRADE = frozenset({INVALID_STEPS, OTHER_REPOSITORY, SAME_ARTIFACT, ARTIFACT_NOT_UPGRADABLE})


class UpgradeRequest(BaseModel):
    """The `upgrade` update of a workload's workflow (`POST /v1/workloads/{id}/upgrade`): move the
    workload to another approved artifact, cluster by cluster, in gateway-weight steps."""

    artifact_id: str = Field(description="<org>/<name>@<sha> of an approved artifact")
    requested_by: str = "unknown"
    team: str = Field(default=DEFAULT_TEAM, description="the requester's team")
    reason: str | None = Field(default=None, description="why, when not a person's request (e.g. follow: auto)")
    steps: list[int] = Field(default_factory=lambda: [10, 50, 100], min_length=1, max_length=10,
                             description="percent of the cluster's traffic on the new version at each step; "
                                         "ends at 100")
    dwell_seconds: float = Field(default=60, ge=0, le=86_400, description="how long each step is watched")
    thresholds: UpgradeThresholds = Field(default_factory=UpgradeThresholds)
    # Another shape of the same model (or of the same artifact): None keeps the workload's.
    variant: NameText | None = Field(default=None, description="another precision variant")
    features: list[NameText] | None = Field(default=None, max_length=MAX_LIST,
                                            description="the opt-in features from now on")
    layout: NameText | None = Field(default=None, description="another parallelism layout")

    def changes_shape(self) -> bool:
        return self.variant is not None or self.features is not None or self.layout is not None


class UpgradeControl(BaseModel):
    """`pause_upgrade`, `resume_upgrade`, `abort_upgrade`: who asks, and why."""

    requested_by: str = "unknown"
    team: str = DEFAULT_TEAM
    reason: CommentText | None = None



UpgradeState = Literal["running", "paused", "succeeded", "rolled_back", "aborted", "failed"]


class UpgradeClusterProgress(BaseModel):
    cluster: str
    phase: str = Field(description="waiting, surging, bringing up, step N of M, draining old, done, rolled back")
    new_weight_percent: int = 0
    verdict: StepVerdict | None = Field(default=None, description="the step's comparison so far (its windows "
                                                                 "add up)")
    decides_by: datetime | None = Field(default=None, description="while a step collects traffic: when it decides "
                                                                  "at the latest, on whatever traffic came")
    replicas: int = 0
    surge: bool = Field(default=False, description="no room for both versions: one replica at a time")
    old_dgd: str | None = None
    new_dgd: str | None = None


class UpgradeStatus(BaseModel):
    upgrade_id: str
    workload_id: str
    from_artifact_id: str
    to_artifact_id: str
    state: UpgradeState
    requested_by: str
    clusters: list[UpgradeClusterProgress] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list, description="the figures that made it roll back")
    update_id: str | None = Field(default=None, description="the Temporal update that started it (idempotency)")
    revision: int = Field(default=0, description="the new version's revision (its DGDs are named with it)")
    steps: list[int] = Field(default_factory=list)
    dwell_seconds: float = 0
    paused_reason: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def running(self) -> bool:
        return self.state in ("running", "paused")

    def cluster(self, name: str) -> UpgradeClusterProgress:
        return next(c for c in self.clusters if c.cluster == name)


# --- its activities' payloads ----------------------------------------------------------------------


class PlanUpgradeInput(BaseModel):
    current: WorkloadPlan
    request: UpgradeRequest


class PlanUpgradeOutput(BaseModel):
    plan: WorkloadPlan | None = None
    problem: str | None = None  # why the upgrade is refused, in the user's words
    kind: str | None = None  # the refusal's type name


class SplitInput(BaseModel):
    workload_id: str
    cluster: str
    revision: int
    percent: int | None  # None: no split, weights follow replicas again


class CountersInput(BaseModel):
    endpoints: list[str]
    backends: list[str]


class CountersOutput(BaseModel):
    counters: dict[str, BackendCounters]


class UpgradeEvent(BaseModel):
    workload_id: str
    source: str
    step: str
    kind: str
    actor: str = "system"
    detail: dict[str, Any] = {}

"""Response models: the shapes the OpenAPI schema publishes, what FastAPI checks each answer against, and
what the services (api/services/) return to the routes and the console.

Registry rows go out as the JSON encoder made them (timestamps as `isoformat()`, "+00:00", not pydantic's
"Z"), and keys a row did not carry stay absent (the routes set `response_model_exclude_unset`). Every field
an answer carries is named here: a column a later migration adds is dropped until it is named, so a new
column never reaches clients unannounced (tests/api_guard/test_response_models.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi.encoders import jsonable_encoder
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, model_validator

from contracts.artifact import ArtifactStatus
from contracts.conditions import Condition
from contracts.upgrade import UpgradeStatus
from contracts.workload import WorkloadStatus
from wingsmith.adapters.store.clusters import ClusterRecord
from wingsmith.adapters.traffic_plans import PlanProgress
from wingsmith.domain.autoscaling import AutoscalingPolicy
from wingsmith.domain.draft_performance import PerformanceRow
from wingsmith.domain.gateway.routes import RouteStatus
from wingsmith.domain.placement import ClusterInventory, PlacementDecision
from wingsmith.domain.quotas import Line, Quota, Use, Verdict
from wingsmith.domain.target_plan import TargetChoice
from wingsmith.domain.workloads import Follow, WorkloadPlan

# A registry timestamp as the API has always written it: ISO 8601 from `datetime.isoformat()` ("+00:00"), a
# datetime to the console.
Timestamp = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str, when_used="json"),
                      Field(json_schema_extra={"format": "date-time"})]


class Stored(BaseModel):
    """A registry row (or a few rows) as JSON: the columns named here, typed; any other is dropped."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _as_json(cls, data: Any) -> Any:
        # What the JSON encoder makes of a row (a datetime inside a document as `isoformat()`), so the answer
        # stays byte for byte as before; the timestamps named above are parsed back into datetimes.
        return jsonable_encoder(data)


def answer_fields(answer: BaseModel) -> dict[str, Any]:
    """An answer as the console's pages read it: the keys the REST answer carries (those a row did not carry
    stay absent), timestamps as datetimes."""
    return answer.model_dump(exclude_unset=True)


# ---- health ----------------------------------------------------------------------------------------

class Health(BaseModel):
    status: Literal["ok"]


class Version(BaseModel):
    release: str = Field(description="the release, from the installed package (semantic versioning)")
    build: str = Field(description="the image's build id, or the checkout's commit (`+dirty` with local changes)")


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    checks: dict[str, str] = Field(description="postgres, temporal (and clusters): 'ok' or what is pending")


# ---- the audit trail, shared by artifacts and workloads ----------------------------------------------

class Event(Stored):
    step: str
    kind: str
    actor: str
    detail: dict[str, Any]
    at: Timestamp


# ---- artifacts -------------------------------------------------------------------------------------

class ArtifactSummary(Stored):
    id: str
    repo_id: str
    revision: str
    sha: str
    state: str
    workflow_id: str
    requested_by: str
    superseded_by: str | None
    created_at: Timestamp
    updated_at: Timestamp
    draft_version: int | None = Field(description="the latest draft's version; None before the first draft")


class ArtifactList(BaseModel):
    artifacts: list[ArtifactSummary]


class Registered(BaseModel):
    id: str
    workflow_id: str
    workflow_url: str
    sha: str
    revision: str
    started: bool = Field(description="false when this artifact already existed (the call was a repeat)")


class EstimatesAsked(BaseModel):
    workflow_id: str
    workflow_url: str
    started: bool = Field(description="false when the estimates had been asked already (the call was a repeat)")


class Draft(Stored):
    artifact_id: str
    version: int
    catalog_version: str
    evidence: dict[str, Any]
    sizing: dict[str, Any]
    warnings: list[Any]
    created_at: Timestamp
    diff_base: str | None = Field(None, description="the approved artifact this draft's diff is taken against: the "
                                  "repository's newest approved one when the draft was saved (None: there was none)")
    performance: list[PerformanceRow] = Field(default_factory=list, description=(
        "AIConfigurator's expected performance, one row per card × layout × mode (docs/planning-by-load.md); "
        "rows follow the draft as the perf worker answers"))
    performance_status: str = Field("pending", description="pending (estimates follow), estimated, unavailable, "
                                    "or not_asked (a draft that predates estimates)")
    performance_reason: str | None = Field(None, description="why there are no figures (yet), in words")


class Review(Stored):
    artifact_id: str
    draft_version: int
    decision: str
    reviewer: str
    via: str
    comment: str
    selections: dict[str, Any]
    decided_at: Timestamp


class ArtifactDetail(Stored):
    """The registry row with its latest draft, review and events; while the workflow has not written
    the row yet, only `id`, `state` and the workflow's fields."""

    id: str
    state: str
    repo_id: str | None = None
    revision: str | None = None
    sha: str | None = None
    requested_by: str | None = None
    proposal: dict[str, Any] | None = None
    superseded_by: str | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    draft: Draft | None = None
    review: Review | None = None
    events: list[Event] | None = None
    workflow_id: str
    workflow_url: str
    live: ArtifactStatus | None = Field(description="the workflow's status query; None once it has ended")
    diff: dict[str, Any] | None = Field(description="what this draft changes against the approved artifact")


# ---- clusters and placement ------------------------------------------------------------------------

class ClusterList(BaseModel):
    clusters: list[ClusterRecord]


class DryRunResponse(BaseModel):
    decision: PlacementDecision
    inventories: list[ClusterInventory] = Field(description="the inventories the decision used")


# ---- workloads -------------------------------------------------------------------------------------

class Deployment(Stored):
    """A workload's deployment on one cluster: a listing carries the first six columns, a workload's own
    answer all of them."""

    cluster: str
    revision: int
    dgd_name: str
    replicas: int
    state: str
    frontend_url: str | None
    workload_id: str | None = None
    namespace: str | None = None
    detail: dict[str, Any] | None = Field(None, description="what the rollout last recorded: generation, cause")
    updated_at: Timestamp | None = None


class WorkloadSummary(Stored):
    id: str
    artifact_id: str
    state: str
    workflow_id: str
    requested_by: str
    team: str
    spec: dict[str, Any]
    created_at: Timestamp
    updated_at: Timestamp
    deployments: list[Deployment]


class WorkloadList(BaseModel):
    workloads: list[WorkloadSummary]


class Placement(Stored):
    revision: int
    decision: dict[str, Any]


class WorkloadDetail(Stored):
    """The registry row with its deployments, placement, events and follow policy, plus the workflow's
    live status; while the workflow has not written the row yet, only `id` and the workflow's fields."""

    id: str
    artifact_id: str | None = None
    state: str | None = None
    requested_by: str | None = None
    team: str | None = None
    spec: dict[str, Any] | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    deployments: list[Deployment] | None = None
    placement: Placement | None = None
    events: list[Event] | None = None
    follow: str | None = None
    workflow_id: str
    workflow_url: str
    live: WorkloadStatus | None = Field(description="the workflow's status query; None once it has ended")
    upgrade: UpgradeStatus | None = Field(description="the upgrade under way, if any")


class WorkloadDeleting(BaseModel):
    id: str
    state: Literal["deleting"]


class Created(BaseModel):
    id: str
    workflow_id: str
    workflow_url: str
    plan: WorkloadPlan


class DryRun(BaseModel):
    dry_run: bool = True
    plan: WorkloadPlan
    placement: dict[str, Any]
    manifests: dict[str, dict[str, Any]] = Field(description="cluster → the DynamoGraphDeployment it would get")
    target_plan: TargetChoice | None = Field(None, description="with a traffic target: each candidate card's plan "
                                             "(configuration, replicas, GPUs, predicted TTFT/TPOT) and why it lost")
    quota: Verdict | None = Field(None, description="whether creating it fits the team's quota (docs/teams-and-"
                                  "sign-in.md#quotas): each limit it touches with used, asked and quota")


class Planning(BaseModel):
    """A workload sized by traffic whose plan is not there yet: where to follow it."""
    state: Literal["planning"] = "planning"
    status_url: str = Field(description="GET it (also the Location header): the progress while AIConfigurator "
                            "plans, then the dry-run's answer, in the shape a dry-run POST answers with")
    workflow_id: str = Field(description="the plan's workflow (TrafficPlanWorkflow), in the Temporal UI")
    workflow_url: str
    cards: list[str] = Field(description="the cards being planned: the one asked for, then the fleet's")
    progress: PlanProgress
    then: str = Field(description="what to do next, in words")


class UpgradeAnswer(BaseModel):
    upgrade: UpgradeStatus
    workflow_url: str


class FollowPolicy(BaseModel):
    workload_id: str
    follow: Follow
    set_by: str


class AutoscaleDecisionRow(BaseModel):
    """One decision of a workload's autoscaler, with the inputs it was taken on and what came of it."""
    at: datetime
    action: Literal["scale_out", "scale_in", "hold"]
    replicas_from: int
    replicas_to: int
    outcome: str = Field(description="held, scaled, waiting_approval, held_quota, held_budget, refused")
    words: str = Field(description="the decision in a sentence")
    note: str = Field(default="", description="what came of it: the quota's numbers, who approved")
    reasons: list[str]
    inputs: dict[str, Any] = Field(description="policy, replicas, capacity per replica, the window's figures")
    step: str


class Autoscaling(BaseModel):
    workload_id: str
    policy: AutoscalingPolicy | None = Field(description="None: the workload does not scale itself")
    set_by: str | None = None
    workflow_id: str
    workflow_url: str
    waiting: dict[str, Any] | None = Field(default=None, description="the decision waiting for an approval "
                                           "(POST .../autoscaling/approve with its tick)")
    decisions: list[AutoscaleDecisionRow] = Field(description="the newest first")


# ---- team quotas ----------------------------------------------------------------------------------

class TeamQuota(BaseModel):
    """A team's quota (None: not limited) and what its workloads hold against it."""
    team: str
    quota: Quota | None = Field(description="GPUs per card (or `*`), the budget per hour and the policy; None: no "
                                "quota, nothing is limited")
    set_by: str | None = Field(description="the admin who set it last")
    updated_at: Timestamp | None
    use: Use = Field(description="what the team's live workloads hold: GPUs per card, cost per hour")
    lines: list[Line] = Field(description="each limit of the quota with what is used against it (asked: 0)")
    words: str = Field(description="use against quota, in a sentence")


# ---- endpoints -------------------------------------------------------------------------------------

# Whether clients can call the name yet: the endpoint's workflow publishes its routes once a workload of it
# serves, a moment (or, while its workloads roll out, minutes) after the create (issue 52).
PUBLISHED = ("whether the gateway routes the name now (a backend with weight above 0): until then a chat answers "
             "404 model_not_found. Follow GET /v1/endpoints/{name} until it is true (`wingsmith endpoints create "
             "--wait` does); None when the gateway could not be asked")


class EndpointStarted(BaseModel):
    name: str
    workflow_id: str
    started: bool = Field(description="false when this endpoint already existed with these workloads")
    workflow_url: str
    url: str = Field(description="the gateway's OpenAI-compatible base URL; clients send `model: <name>`")
    workloads: list[str]
    published: bool | None = Field(description=PUBLISHED)


class EndpointChanged(BaseModel):
    name: str
    workflow_id: str
    workflow_url: str
    stage: str
    workloads: list[str] = Field(description="the workloads it routes to from now on")
    draining: list[str] = Field(description="leaving workloads, drained before they are removed")


class EndpointSummary(Stored):
    name: str
    workloads: list[str]
    state: str
    routes: list[dict[str, Any]] = Field(description="the backends the endpoint's workflow last routed to")
    team: str
    requested_by: str
    updated_at: Timestamp


class EndpointList(BaseModel):
    endpoints: list[EndpointSummary]


class EndpointDetail(EndpointSummary):
    workflow_id: str
    workflow_url: str
    created_at: Timestamp
    health: RouteStatus | None = Field(description="what the gateway reports; None when it has no routes")
    health_error: str | None = Field(default=None, description="present when the gateway could not be read")
    published: bool | None = Field(default=None, description=PUBLISHED)
    conditions: list[Condition] = Field(default_factory=list, description="the endpoint workflow's conditions: "
                                        "Available (RoutesPublished or NoRoutes) and Progressing; empty when its "
                                        "workflow cannot be asked")


class EndpointDeleting(BaseModel):
    name: str
    state: Literal["deleting"]


# ---- watches ---------------------------------------------------------------------------------------

class WatchRun(BaseModel):
    at: Timestamp
    workflow_id: str
    workflow_url: str


class Watch(BaseModel):
    id: str = Field(description="watch/<org>/<name>@<branch>, the schedule's id")
    repo_id: str
    branch: str
    team: str
    paused: bool
    note: str | None
    next_runs: list[Timestamp]
    recent_runs: list[WatchRun]


class WatchList(BaseModel):
    watches: list[Watch]


class WatchAction(BaseModel):
    id: str
    action: Literal["pause", "resume", "trigger"]
    paused: bool
    note: str | None


# ---- the Temporal UI's codec -----------------------------------------------------------------------

class Payload(BaseModel):
    metadata: dict[str, str] = Field(default_factory=dict, description="values are base64")
    data: str | None = Field(default=None, description="base64")


class PayloadsAnswer(BaseModel):
    """Temporal's JSON form of payloads (protobuf JSON), as the codec answers them."""

    payloads: list[Payload]

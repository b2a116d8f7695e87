"""Response models of the routes that read the registry or answer with a few fields: the shapes the
OpenAPI schema publishes, and what FastAPI checks each answer against.

They describe the JSON these routes always returned, so clients see no change: registry rows go out
as the JSON encoder made them (timestamps as `isoformat()`, "+00:00", not pydantic's "Z"), keys a row
did not carry stay absent (the routes set `response_model_exclude_unset`), and columns a later
migration adds pass through (`extra="allow"`) until someone names them here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi.encoders import jsonable_encoder
from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.artifact import ArtifactStatus
from contracts.conditions import Condition
from contracts.upgrade import UpgradeStatus
from contracts.workload import WorkloadStatus
from wingsmith.draft_performance import PerformanceRow
from wingsmith.gateway.routes import RouteStatus

# A registry timestamp as the API has always written it: ISO 8601 from `datetime.isoformat()`.
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class Stored(BaseModel):
    """A registry row (or a few rows) as JSON: declared columns are typed, others pass through."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _as_json(cls, data: Any) -> Any:
        # asyncpg hands out datetimes; encoding them first keeps the answer byte for byte as before.
        return jsonable_encoder(data)


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


# ---- workloads -------------------------------------------------------------------------------------

class Deployment(Stored):
    cluster: str
    revision: int
    dgd_name: str
    replicas: int
    state: str
    frontend_url: str | None


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


# ---- endpoints -------------------------------------------------------------------------------------

class EndpointStarted(BaseModel):
    name: str
    workflow_id: str
    started: bool = Field(description="false when this endpoint already existed with these workloads")
    workflow_url: str
    url: str = Field(description="the gateway's OpenAI-compatible base URL; clients send `model: <name>`")
    workloads: list[str]


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

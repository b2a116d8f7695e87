"""The endpoint workflow's contract (`endpoint/<model-name>`): its input, state (carried across
continue-as-new), status, the payloads and names of its signals, updates and query, and the
`ApplicationError` types its updates refuse with, and the names and payloads of the activities it
calls (activities/endpoint.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from contracts.conditions import Condition
from wingsmith.domain.endpoints import BackendRef
from wingsmith.domain.endpoints import (
    WorkloadRef as WorkloadRef,  # the workload_changed, workload_deleting signals' payload
)
from wingsmith.domain.gateway.routes import EndpointRoutes
from wingsmith.domain.teams import DEFAULT_TEAM

# The workflow's type name and its handlers' names: clients start and call it by these.
WORKFLOW = "EndpointWorkflow"
QUERY_STATUS = "status"  # -> EndpointStatus
UPDATE_SET_WORKLOADS = "set_workloads"  # SetWorkloads -> EndpointStatus
UPDATE_DELETE = "delete"  # (no argument) -> EndpointStatus
SIGNAL_WORKLOAD_CHANGED = "workload_changed"  # WorkloadRef
SIGNAL_WORKLOAD_DELETING = "workload_deleting"  # WorkloadRef: drain it, then tell it `drained`
SIGNAL_BACKEND_LEAVING = "backend_leaving"  # BackendRef: one cluster's deployment is about to go
SIGNAL_BACKEND_GONE = "backend_gone"  # BackendRef

# Why an update is refused (`ApplicationError` types).
INVALID_WORKLOADS = "InvalidWorkloads"  # none, or one that does not serve the endpoint's model
STILL_DRAINING = "StillDraining"  # added again before it left
ENDPOINT_DELETING = "EndpointDeleting"
ALREADY_DELETED = "AlreadyDeleted"

# Its activities (names recorded in histories: never rename one).
ACTIVITY_OBSERVE = "endpoint.observe"  # ObserveInput -> EndpointRoutes
ACTIVITY_SET_ROUTES = "endpoint.set_routes"  # SetRoutesInput -> wingsmith.domain.gateway.routes.RouteStatus | None
ACTIVITY_WAIT_DRAINED = "endpoint.wait_drained"  # DrainInput -> bool
ACTIVITY_RECORD = "endpoint.record"  # EndpointRecord -> None
ACTIVITY_CHECK_WORKLOADS = "endpoint.check_workloads"  # CheckWorkloadsInput -> CheckWorkloadsOutput


class EndpointState(BaseModel):
    workloads: list[str]
    # The Hugging Face repository it serves (lower-cased): every workload must serve it. None for
    # endpoints started before it was recorded, until their next change (their workloads then say).
    model: str | None = None
    draining: list[str] = Field(default_factory=list)
    # One cluster of a workload scaling away: weight 0 until its deployment is gone.
    draining_backends: list[BackendRef] = Field(default_factory=list)
    drained_backends: list[BackendRef] = Field(default_factory=list, description="told to their workload already")
    routes: EndpointRoutes | None = None
    stage: str = "starting"
    passes: int = 0
    conditions: list[Condition] = Field(default_factory=list)


class EndpointWorkflowInput(BaseModel):
    name: str
    workloads: list[str]
    model: str | None = Field(default=None, description="the Hugging Face repository its workloads serve")
    # Who created it and the team that owns it (histories from before teams: the default team).
    requested_by: str = "unknown"
    team: str = DEFAULT_TEAM
    drain_grace_seconds: int = 30
    resync_seconds: int = 30
    history_limit: int | None = Field(default=None, ge=10, description="tests only: continue as new past this "
                                      "many events (otherwise when the server suggests it)")
    resume: EndpointState | None = None


class EndpointStatus(BaseModel):
    name: str
    stage: str
    workloads: list[str]
    draining: list[str]
    routes: EndpointRoutes | None
    model: str | None = None
    team: str = DEFAULT_TEAM
    conditions: list[Condition] = Field(default_factory=list, description="Available (RoutesPublished or "
                                        "NoRoutes) and Progressing: status, reason, message, last transition")


class SetWorkloads(BaseModel):
    workloads: list[str] = Field(description="the endpoint's workloads from now on; others are drained, then dropped")
    requested_by: str = Field(default="unknown", max_length=200)
    team: str = Field(default=DEFAULT_TEAM, max_length=63, description="the requester's team")


# --- its activities' payloads ----------------------------------------------------------------------


class ObserveInput(BaseModel):
    """Which deployments of its workloads serve now (the endpoint's look; a workload's is
    contracts.workload.ObserveDeploymentInput)."""
    name: str
    workloads: list[str]
    draining: list[str] = []
    draining_backends: list[BackendRef] = []  # one cluster of a workload scaling away


class SetRoutesInput(BaseModel):
    routes: EndpointRoutes


class DrainInput(BaseModel):
    name: str
    backends: list[BackendRef]
    grace_seconds: float


class EndpointRecord(BaseModel):
    name: str
    workloads: list[str]
    state: str
    workflow_id: str
    routes: list[dict[str, Any]]
    step: str
    event: str | None = None  # the event's kind when it is not `endpoint_<state>`
    actor: str = "system"
    team: str = DEFAULT_TEAM  # the owning team (events recorded before teams existed: the default one)
    requested_by: str = "unknown"  # who created the endpoint


class CheckWorkloadsInput(BaseModel):
    name: str
    workloads: list[str]
    model: str | None = None  # the repository the endpoint serves, once it knows (endpoints started before it did not)
    current: list[str] = []  # the endpoint's workloads now: the model is theirs when `model` is not known


class CheckWorkloadsOutput(BaseModel):
    problems: list[str]
    model: str | None = None  # the endpoint's model after the change

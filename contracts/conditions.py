"""Conditions and events: what a workload's (or an endpoint's) status says, as data a program can read.

A condition is Kubernetes-style (like kueue's workload conditions): one per `type`, its `status`
"True", "False" or "Unknown", a `reason` (a constant below, CamelCase) and a human `message`.
`last_transition_time` is when `status` last changed, not when the message did, so "degraded for
how long" is one subtraction. Events are what happened, each with a reason and a typed detail; the
prose strings the status carried before (`events`) stay for one release, rendered from them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, JsonValue

ConditionStatus = Literal["True", "False", "Unknown"]

# --- condition types ------------------------------------------------------------------------------
AVAILABLE = "Available"  # some replica serves (a workload), or some route is published (an endpoint)
PROGRESSING = "Progressing"  # the plane is changing it: placing, rolling out, scaling, deleting
DEGRADED = "Degraded"  # what is observed is less than what was asked
UPGRADE_IN_PROGRESS = "UpgradeInProgress"  # a progressive upgrade runs or waits for a person

# --- condition reasons ----------------------------------------------------------------------------
REPLICAS_SERVING = "ReplicasServing"
NO_REPLICA_SERVING = "NoReplicaServing"
ROUTES_PUBLISHED = "RoutesPublished"
NO_ROUTES = "NoRoutes"
PLANNING = "Planning"
PLACING = "Placing"
ROLLING_OUT = "RollingOut"
SCALING = "Scaling"
DELETING = "Deleting"
DELETED = "Deleted"
SETTLED = "Settled"
DRAINING = "Draining"  # an endpoint waits for leaving workloads' or clusters' requests to finish
FAILED = "Failed"
AS_PLANNED = "AsPlanned"
CLUSTER_DEGRADED = "ClusterDegraded"
REPLICAS_MISSING = "ReplicasMissing"
NO_UPGRADE = "NoUpgrade"
UPGRADE_RUNNING = "UpgradeRunning"
UPGRADE_PAUSED = "UpgradePaused"
UPGRADE_SUCCEEDED = "UpgradeSucceeded"
UPGRADE_ROLLED_BACK = "UpgradeRolledBack"
UPGRADE_ABORTED = "UpgradeAborted"
UPGRADE_FAILED = "UpgradeFailed"

# --- event reasons ----------------------------------------------------------------------------------
# placing and rolling out
PLACED = "Placed"
REPLICAS_UNPLACED = "ReplicasUnplaced"
CANARY_FAILED = "CanaryFailed"
CLUSTER_FAILED = "ClusterFailed"
CLUSTER_SERVING = "ClusterServing"
CLUSTER_REMOVED = "ClusterRemoved"
FAILED_DEPLOYMENT_REMOVED = "FailedDeploymentRemoved"
FAILED_DEPLOYMENT_LEFT = "FailedDeploymentLeft"
SCALE_INCOMPLETE = "ScaleIncomplete"
# observing and healing
CLUSTER_DEGRADED_EVENT = "ClusterDegraded"
RECOVERED = "Recovered"
DRIFT_LEFT_IN_PLACE = "DriftLeftInPlace"
DRIFT_GONE = "DriftGone"
HEALED = "Healed"
PLACEMENT_RETRY = "PlacementRetry"
CLUSTER_ANSWERS_AGAIN = "ClusterAnswersAgain"
LEFTOVER_NOT_REMOVED = "LeftoverNotRemoved"
CLUSTER_UNREGISTERED = "ClusterUnregistered"
# endpoints, teardown and the saga
ENDPOINTS_DRAINED = "EndpointsDrained"
DRAIN_TIMED_OUT = "DrainTimedOut"
SIGNAL_FAILED = "SignalFailed"
DEPLOYMENTS_LEFT = "DeploymentsLeft"
ROLLING_BACK = "RollingBack"
# the upgrade
UPGRADE_STARTED = "UpgradeStarted"
UPGRADE_SURGING = "UpgradeSurging"
UPGRADE_NEW_VERSION_SERVING = "UpgradeNewVersionServing"
UPGRADE_STEP = "UpgradeStep"
UPGRADE_JUDGED = "UpgradeJudged"
UPGRADE_NO_TRAFFIC = "UpgradeNoTraffic"
UPGRADE_RESUMED = "UpgradeResumed"
UPGRADE_ROLLING_BACK = "UpgradeRollingBack"
UPGRADE_DEPLOYMENT_LEFT = "UpgradeDeploymentLeft"
UPGRADE_ROLLBACK_INCOMPLETE = "UpgradeRollbackIncomplete"
# (UPGRADE_PAUSED, UPGRADE_SUCCEEDED and UPGRADE_ABORTED above are event reasons as well)


class Condition(BaseModel):
    type: str = Field(max_length=64, description="e.g. Available, Progressing, Degraded, UpgradeInProgress")
    status: ConditionStatus
    reason: str = Field(max_length=64, description="CamelCase, one of the constants in contracts/conditions.py")
    message: str = ""
    last_transition_time: datetime = Field(description="when `status` last changed")


class Event(BaseModel):
    """One thing that happened to the workload, as the workflow saw it (workflow time)."""

    reason: str = Field(max_length=64)
    message: str
    time: datetime
    detail: dict[str, JsonValue] = Field(default_factory=dict, description="the figures behind the message")

    def line(self) -> str:
        """The prose form the status's `events` carried before (kept for one release)."""
        return f"{self.time.isoformat(timespec='seconds')} {self.message}"


def set_condition(conditions: list[Condition], type: str, status: ConditionStatus, reason: str, message: str,
                  now: datetime) -> None:
    """Put `type` in `conditions`, keeping its `last_transition_time` unless `status` changes."""
    for i, old in enumerate(conditions):
        if old.type == type:
            since = old.last_transition_time if old.status == status else now
            conditions[i] = Condition(type=type, status=status, reason=reason, message=message,
                                      last_transition_time=since)
            return
    conditions.append(Condition(type=type, status=status, reason=reason, message=message, last_transition_time=now))


def condition(conditions: list[Condition], type: str) -> Condition | None:
    return next((c for c in conditions if c.type == type), None)

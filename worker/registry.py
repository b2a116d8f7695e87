"""What the worker runs: every workflow, and the activities per task queue with their clients.

Activities that need clients (the database pool, settings) are methods of small classes that
receive them in the constructor, so tests can build the same objects with their own fixtures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from wingsmith.domain.config import Settings


@dataclass
class WorkerDeps:
    settings: Settings
    db: asyncpg.Pool | None = None
    extras: dict = field(default_factory=dict)


def workflows(*, versioned: bool = False) -> list[type]:
    """Every workflow type; `versioned`: for a worker under Worker Versioning, where the cluster check is
    pinned (workflows/cluster_check.py)."""
    from workflows.artifact import ArtifactWorkflow
    from workflows.autoscaler import AutoscalerWorkflow
    from workflows.cluster_check import ClusterCheckWorkflow, PinnedClusterCheckWorkflow
    from workflows.endpoint import EndpointWorkflow
    from workflows.inventory import LiveInventoryWorkflow
    from workflows.perf import DraftPerformanceWorkflow, TrafficPlanSlotWorkflow, TrafficPlanWorkflow
    from workflows.ping import PingWorkflow
    from workflows.rollout import ClusterRolloutWorkflow
    from workflows.watch import WatchWorkflow
    from workflows.workload import WorkloadWorkflow
    return [PingWorkflow, ArtifactWorkflow, WorkloadWorkflow, ClusterRolloutWorkflow, EndpointWorkflow,
            LiveInventoryWorkflow, WatchWorkflow, DraftPerformanceWorkflow, TrafficPlanWorkflow,
            TrafficPlanSlotWorkflow, PinnedClusterCheckWorkflow if versioned else ClusterCheckWorkflow,
            AutoscalerWorkflow]


def main_activities(deps: WorkerDeps) -> list:
    from activities.artifact import ArtifactActivities
    from activities.autoscaler import AutoscalerActivities
    from activities.endpoint import EndpointActivities
    from activities.follow import FollowActivities
    from activities.ping import ping
    from activities.upgrade import UpgradeActivities
    from activities.watch import WatchActivities
    from activities.workload import WorkloadActivities
    artifacts = ArtifactActivities(deps.settings, deps.db, resolver=deps.extras.get("resolver"))
    return [ping, artifacts.resolve_artifact, artifacts.gather_evidence, artifacts.size_draft, artifacts.save_draft,
            artifacts.record_decision, artifacts.record_artifact_event, artifacts.set_artifact_state,
            artifacts.remind_reviewers, artifacts.perf_worker_polling, artifacts.save_draft_performance,
            *WorkloadActivities(deps.db).all(),
            *EndpointActivities(deps.settings, deps.db).all(), *WatchActivities(artifacts).all(),
            *UpgradeActivities(deps.settings, deps.db).all(),
            *FollowActivities(artifacts).all(), *AutoscalerActivities(deps.db).all()]


def kube_activities(deps: WorkerDeps) -> list:
    """Blocking Kubernetes I/O: on the kube task queue, in its own thread pool."""
    from activities.cluster_check import check_cluster
    from activities.inventory import read_inventory
    from activities.rollout import RolloutActivities
    return [read_inventory, check_cluster, *RolloutActivities().all()]


def watch_activities(deps: WorkerDeps) -> list:
    """The watch's looks: async and mostly waiting, on the watch task queue."""
    from activities.observe import ObserveActivities
    return ObserveActivities().all()

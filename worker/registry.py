"""What the worker runs: every workflow, and the activities per task queue with their clients.

Activities that need clients (the database pool, settings) are methods of small classes that
receive them in the constructor, so tests can build the same objects with their own fixtures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from wingsmith.config import Settings


@dataclass
class WorkerDeps:
    settings: Settings
    db: asyncpg.Pool | None = None
    extras: dict = field(default_factory=dict)


def workflows() -> list[type]:
    from workflows.artifact import ArtifactWorkflow
    from workflows.ping import PingWorkflow
    return [PingWorkflow, ArtifactWorkflow]


def main_activities(deps: WorkerDeps) -> list:
    from activities.artifact import ArtifactActivities
    from activities.ping import ping
    artifacts = ArtifactActivities(deps.settings, deps.db, resolver=deps.extras.get("resolver"))
    return [ping, artifacts.resolve_artifact, artifacts.gather_evidence, artifacts.size_draft, artifacts.save_draft,
            artifacts.record_decision, artifacts.record_artifact_event, artifacts.set_artifact_state,
            artifacts.remind_reviewers]


def kube_activities(deps: WorkerDeps) -> list:
    return []

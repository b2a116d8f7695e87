"""The workload as its workflow holds it: the plan, the state carried across continue-as-new, the lock
that whatever changes its clusters holds, and how the workflow says what happened (stage, conditions,
events, registry rows, search attributes). Converging, observing, healing, teardown and the upgrade
all work on this one object, through its public members."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

from contracts.conditions import Event
from contracts.ids import CLUSTERS, STAGE
from contracts.workload import (
    ACTIVITY_RECORD,
    Stage,
    WorkloadRecord,
    WorkloadState,
    WorkloadStatus,
    WorkloadWorkflowInput,
)
from wingsmith.domain.workloads import WorkloadPlan
from workflows import policies
from workflows.workload.conditions import show_conditions

# A cluster in one of these holds replicas: serving, or degraded (the watch's to heal or move).
HOLDING = ("serving", "degraded")
_EVENTS_KEPT = 100


class ChangeLock(asyncio.Lock):
    """The workload's lock, held by whatever changes its clusters (a scale, a heal, an upgrade's step,
    the teardown). It counts its releases, so an observation can tell that what it saw without the
    lock may predate a change."""

    def __init__(self) -> None:
        super().__init__()
        self.changes = 0
        self.quiet = False  # set by a holder that changed nothing: this release does not count

    def release(self) -> None:
        if not self.quiet:
            self.changes += 1
        self.quiet = False
        super().release()


class Workload:
    def __init__(self, params: WorkloadWorkflowInput) -> None:
        self.params = params
        self.plan: WorkloadPlan = params.plan
        self.state: WorkloadState = params.resume or WorkloadState()
        self.lock = ChangeLock()
        self.deleting = False
        self.delete_by = "unknown"
        # Old replicas a running upgrade's surge took down, per cluster: the new version's replicas stand
        # in for them, so neither the watch nor a scale places them again.
        self.surged: dict[str, int] = {}

    # --- what it holds -----------------------------------------------------------------------------

    def replicas(self) -> int:
        return sum(c.replicas for c in self.state.clusters.values() if c.state == "serving")

    def held(self) -> int:
        """Replicas serving or degraded: a degraded cluster's replicas are the watch's to heal or move
        (and those of an upgrade's new version that stand in for old ones)."""
        return sum(c.replicas for c in self.state.clusters.values() if c.state in HOLDING) + self.standing_in()

    def standing_in(self) -> int:
        return sum(self.surged.values())

    def holding(self) -> list[str]:
        return sorted(name for name, c in self.state.clusters.items() if c.state in HOLDING)

    def summary(self) -> dict[str, int]:
        return {name: c.replicas for name, c in sorted(self.state.clusters.items()) if c.state == "serving"}

    def status(self) -> WorkloadStatus:
        return WorkloadStatus(workload_id=self.plan.workload_id, stage=self.state.stage, replicas=self.replicas(),
                              served_model_name=self.plan.served_model_name,
                              clusters=sorted(self.state.clusters.values(), key=lambda c: c.cluster),
                              failure=self.state.failure, events=self.state.events[-50:],
                              conditions=list(self.state.conditions), timeline=self.state.timeline[-50:],
                              upgrade=self.state.upgrade, artifact_id=self.plan.artifact_id, team=self.params.team)

    # --- saying what happened ----------------------------------------------------------------------

    def event(self, reason: str, message: str, **detail: Any) -> None:
        """An event (contracts/conditions.py reasons); its prose also goes to the old `events` list."""
        happened = Event(reason=reason, message=message, time=workflow.now(), detail=detail)
        self.state.timeline = [*self.state.timeline, happened][-_EVENTS_KEPT:]
        self.state.events = [*self.state.events, happened.line()][-_EVENTS_KEPT:]
        self.show_conditions()

    def set_stage(self, stage: Stage) -> None:
        self.state.stage = stage
        workflow.upsert_search_attributes([STAGE.value_set(stage)])
        self.show_conditions()

    def show_conditions(self) -> None:
        """The conditions follow the stage, the clusters and the upgrade (called on every change of them)."""
        show_conditions(self.state, target=self.plan.replicas, serving=self.replicas(),
                        standing_in=self.standing_in(), now=workflow.now())

    def update_search_attributes(self) -> None:
        workflow.upsert_search_attributes([CLUSTERS.value_set(sorted(self.state.clusters))])

    async def record(self, state: str, step: str, detail: dict[str, Any]) -> None:
        """The workload's registry row (what the API lists), keyed by run and step: a retry writes it once."""
        info = workflow.info()
        # What a traffic target sized it by (the workload page's prediction) only when it was.
        sized = {"sized_by"} if self.plan.sized_by is not None else set()
        await workflow.execute_local_activity(ACTIVITY_RECORD, WorkloadRecord(
            workload_id=self.plan.workload_id, artifact_id=self.plan.artifact_id,
            spec=self.plan.model_dump(mode="json", include={"hardware", "layout", "variant", "features", "replicas",
                                                            "served_model_name", "engine", "gpus_per_replica",
                                                            "max_num_seqs", "max_num_seqs_source", "follow", *sized}),
            state=state, workflow_id=info.workflow_id, requested_by=self.params.requested_by,
            team=self.params.team, step=f"{info.run_id}:{step}", detail=detail), **policies.REGISTRY)

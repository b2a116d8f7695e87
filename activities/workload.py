"""Activities of the workload and cluster-rollout workflows that touch the registry or decide
placement. Kubernetes I/O lives in activities/rollout.py and activities/inventory.py."""

from __future__ import annotations

import asyncpg
from temporalio import activity

from activities.registry import registry_pool
from contracts import rollout as rollout_contract
from contracts import workload as contract
from contracts.rollout import DeploymentRecord
from contracts.workload import (
    ClusterTarget,
    ClusterTargets,
    HealRecord,
    NoInput,
    PlaceInput,
    PlacementRecord,
    WorkloadRecord,
)
from wingsmith.adapters.store import clusters as cluster_store
from wingsmith.adapters.store import workloads as store
from wingsmith.domain.placement import place
from wingsmith.domain.placement.models import PlacementDecision
from wingsmith.domain.placement.place import EXPLAIN_IN_WORKFLOWS_UP_TO


class WorkloadActivities:
    def __init__(self, db: asyncpg.Pool | None):
        self.db = db

    def _pool(self) -> asyncpg.Pool:
        return registry_pool(self.db)

    @activity.defn(name=contract.ACTIVITY_LIST_CLUSTERS)
    async def list_clusters(self, _: NoInput) -> ClusterTargets:
        records = await cluster_store.list_clusters(self._pool())
        return ClusterTargets(clusters=[ClusterTarget(
            info=r.info(), kubeconfig=r.kubeconfig_ref(), frontend_base_url=r.frontend_base_url,
            manual_inventory=r.manual_inventory.to_inventory(r.name) if r.manual_inventory else None)
            for r in records])

    @activity.defn(name=contract.ACTIVITY_PLACE)
    def place(self, params: PlaceInput) -> PlacementDecision:
        # An activity, not workflow code: the decision is recorded in history, so improving the
        # placement function never changes what a running workflow replays.
        small = len(params.inventories) <= EXPLAIN_IN_WORKFLOWS_UP_TO
        return place(params.plan, params.inventories, params.clusters, explain=small)

    @activity.defn(name=contract.ACTIVITY_RECORD)
    async def record_workload(self, r: WorkloadRecord) -> None:
        await store.upsert_workload(self._pool(), workload_id=r.workload_id, artifact_id=r.artifact_id, spec=r.spec,
                                    state=r.state, workflow_id=r.workflow_id, requested_by=r.requested_by,
                                    step=r.step, detail=r.detail, team=r.team)

    @activity.defn(name=contract.ACTIVITY_RECORD_PLACEMENT)
    async def record_placement(self, r: PlacementRecord) -> None:
        await store.save_placement(self._pool(), workload_id=r.workload_id, revision=r.revision,
                                   decision=r.decision.model_dump(mode="json"), workflow_id=r.workflow_id)

    @activity.defn(name=rollout_contract.ACTIVITY_RECORD_DEPLOYMENT)
    async def record_deployment(self, r: DeploymentRecord) -> None:
        await store.record_deployment(self._pool(), workload_id=r.workload_id, cluster=r.cluster,
                                      dgd_name=r.dgd_name, namespace=r.namespace, replicas=r.replicas,
                                      state=r.state, frontend_url=r.frontend_url, detail=r.detail,
                                      source=r.source, step=r.step, revision=r.revision)

    @activity.defn(name=contract.ACTIVITY_RECORD_HEAL)
    async def record_heal(self, r: HealRecord) -> None:
        await store.record_heal(self._pool(), workload_id=r.workload_id, workflow_id=r.workflow_id, step=r.step,
                                cluster=r.cluster, action=r.action, problem=r.problem, cause=r.cause,
                                seconds=r.seconds, outcome=r.outcome,
                                times=r.model_dump(mode="json",
                                                   include={"fault_at", "fault_after", "seen_at", "served_at"}))

    def all(self) -> list:
        return [self.list_clusters, self.place, self.record_workload, self.record_placement, self.record_deployment,
                self.record_heal]

"""Activities of the workload and cluster-rollout workflows that touch the registry or decide
placement. Kubernetes I/O lives in activities/rollout.py and activities/inventory.py."""

from __future__ import annotations

import asyncpg
from pydantic import BaseModel
from temporalio import activity

from activities.registry import registry_pool
from wingsmith.kube import KubeconfigRef
from wingsmith.placement import place
from wingsmith.placement.models import ClusterInfo, ClusterInventory, PlacementDecision, PlacementPlan
from wingsmith.store import clusters as cluster_store
from wingsmith.store import workloads as store
from wingsmith.teams import DEFAULT_TEAM


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


class DeploymentRecord(BaseModel):
    workload_id: str
    cluster: str
    revision: int = 0
    dgd_name: str
    namespace: str
    replicas: int
    state: str
    frontend_url: str | None = None
    detail: dict = {}
    source: str
    step: str


class HealRecord(BaseModel):
    workload_id: str
    workflow_id: str
    step: str
    cluster: str
    action: str
    problem: str = "other"  # wingsmith.reconcile.Problem
    cause: str
    seconds: float
    outcome: str


class WorkloadActivities:
    def __init__(self, db: asyncpg.Pool | None):
        self.db = db

    def _pool(self) -> asyncpg.Pool:
        return registry_pool(self.db)

    @activity.defn(name="workload.list_clusters")
    async def list_clusters(self, _: NoInput) -> ClusterTargets:
        records = await cluster_store.list_clusters(self._pool())
        return ClusterTargets(clusters=[ClusterTarget(
            info=r.info(), kubeconfig=r.kubeconfig_ref(), frontend_base_url=r.frontend_base_url,
            manual_inventory=r.manual_inventory.to_inventory(r.name) if r.manual_inventory else None)
            for r in records])

    @activity.defn(name="workload.place")
    def place(self, params: PlaceInput) -> PlacementDecision:
        # An activity, not workflow code: the decision is recorded in history, so improving the
        # placement function never changes what a running workflow replays.
        return place(params.plan, params.inventories, params.clusters)

    @activity.defn(name="workload.record")
    async def record_workload(self, r: WorkloadRecord) -> None:
        await store.upsert_workload(self._pool(), workload_id=r.workload_id, artifact_id=r.artifact_id, spec=r.spec,
                                    state=r.state, workflow_id=r.workflow_id, requested_by=r.requested_by,
                                    step=r.step, detail=r.detail, team=r.team)

    @activity.defn(name="workload.record_placement")
    async def record_placement(self, r: PlacementRecord) -> None:
        await store.save_placement(self._pool(), workload_id=r.workload_id, revision=r.revision,
                                   decision=r.decision.model_dump(mode="json"), workflow_id=r.workflow_id)

    @activity.defn(name="workload.record_deployment")
    async def record_deployment(self, r: DeploymentRecord) -> None:
        await store.record_deployment(self._pool(), workload_id=r.workload_id, cluster=r.cluster,
                                      dgd_name=r.dgd_name, namespace=r.namespace, replicas=r.replicas,
                                      state=r.state, frontend_url=r.frontend_url, detail=r.detail,
                                      source=r.source, step=r.step, revision=r.revision)

    @activity.defn(name="workload.record_heal")
    async def record_heal(self, r: HealRecord) -> None:
        await store.record_heal(self._pool(), workload_id=r.workload_id, workflow_id=r.workflow_id, step=r.step,
                                cluster=r.cluster, action=r.action, problem=r.problem, cause=r.cause,
                                seconds=r.seconds, outcome=r.outcome)

    def all(self) -> list:
        return [self.list_clusters, self.place, self.record_workload, self.record_placement, self.record_deployment,
                self.record_heal]

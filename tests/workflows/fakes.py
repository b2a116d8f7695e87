"""Fake activities registered under the real names (temporalio/samples-python style), so the real
workflows run on a time-skipping test server against a small in-memory world: clusters with a
replica capacity, the deployments applied to them, an endpoint's routes, and scripted faults.

Every fake writes what it did to `world.log`, so a test can check the order of effects (a backend's
route drained before its deployment is deleted, say)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from contracts import endpoint, rollout, workload
from contracts.workload import WorkloadWorkflowInput
from wingsmith.adapters.kube import KubeconfigRef
from wingsmith.domain.config import observe_task_queue
from wingsmith.domain.dynamo import WorkerPool, dgd_name
from wingsmith.domain.endpoints import ServingDeployment, routes_from_deployments
from wingsmith.domain.gateway import EndpointRoutes, RouteStatus
from wingsmith.domain.placement.models import ClusterInfo, ClusterInventory, PlacementDecision, PlacementPlan
from wingsmith.domain.reconcile import FrontendCheck, Observation
from wingsmith.domain.workloads import WorkloadPlan
from worker.registry import workflows
from worker.sandbox import WORKFLOW_RUNNER

SHA = "a" * 40


@dataclass
class World:
    capacity: dict[str, int]  # cluster -> replicas it can hold
    dgds: dict[str, int] = field(default_factory=dict)  # cluster -> replicas of the applied deployment
    crash_looping: set[str] = field(default_factory=set)  # wait_ready fails there (final)
    refuse_deletes: dict[str, int] = field(default_factory=dict)  # cluster -> deletes still refused
    hold_ready: set[str] = field(default_factory=set)  # wait_ready blocks there until cancelled
    unreachable: set[str] = field(default_factory=set)  # workload.observe gets no answer there
    silent: set[str] = field(default_factory=set)  # workload.observe itself gives no answer (its worker lost)
    held_looks: asyncio.Event | None = None  # set: every look answers only once it is set (a slow look)
    looks_waiting: int = 0
    generations: dict[str, int] = field(default_factory=dict)  # cluster -> generation of its deployment
    applied_generations: dict[str, int] = field(default_factory=dict)  # cluster -> the plane's last apply
    looks: int = 0  # reads of a cluster by looks
    heals: list[workload.HealRecord] = field(default_factory=list)
    routes: EndpointRoutes | None = None
    log: list[str] = field(default_factory=list)
    workload_states: list[str] = field(default_factory=list)
    unknown_workloads: set[str] = field(default_factory=set)  # endpoint.check_workloads refuses these
    held_changes: asyncio.Event | None = None  # set: endpoint.record of a workloads change waits for it
    held_drains: asyncio.Event | None = None  # set: endpoint.wait_drained waits for it (a slow drain)
    changes_waiting: int = 0
    _names: dict[str, str] = field(default_factory=dict)  # DGD name -> cluster

    def cluster_of(self, dgd_name: str) -> str:
        return self._names[dgd_name]

    # --- workload.* -------------------------------------------------------------------------------

    @activity.defn(name="workload.list_clusters")
    async def list_clusters(self, _: workload.NoInput) -> workload.ClusterTargets:
        # Manual inventories: the workflow reads no cluster (read_inventory is not called).
        return workload.ClusterTargets(clusters=[workload.ClusterTarget(
            info=ClusterInfo(name=name), kubeconfig=KubeconfigRef(source=f"/fake/{name}"),
            manual_inventory=ClusterInventory(cluster=name, source="manual")) for name in sorted(self.capacity)])

    @activity.defn(name="workload.place")
    async def place(self, params: workload.PlaceInput) -> PlacementDecision:
        """Spread over the clusters with room, most room first; denied clusters take nothing."""
        denied = set(params.plan.constraints.denied_clusters)
        room = {c: cap - self.dgds.get(c, 0) for c, cap in self.capacity.items() if c not in denied}
        placed: dict[str, int] = {}
        for _ in range(params.plan.replicas):
            free = {c: r - placed.get(c, 0) for c, r in room.items() if r - placed.get(c, 0) > 0}
            if not free:
                break
            best = max(free, key=lambda c: (free[c], -ord(c[-1])))
            placed[best] = placed.get(best, 0) + 1
        total = sum(placed.values())
        unplaced = params.plan.replicas - total
        summary = f"{total} of {params.plan.replicas} placed" + (f" ({unplaced} found no room)" if unplaced else "")
        self.log.append(f"place {params.plan.replicas}: {dict(sorted(placed.items()))}")
        return PlacementDecision(plan=params.plan, replicas=placed, placed=total, unplaced=unplaced,
                                 summary=summary, clusters=[])

    @activity.defn(name="workload.record")
    async def record_workload(self, r: workload.WorkloadRecord) -> None:
        self.workload_states.append(r.state)

    @activity.defn(name="workload.record_placement")
    async def record_placement(self, r: workload.PlacementRecord) -> None:
        pass

    @activity.defn(name="workload.record_deployment")
    async def record_deployment(self, r: rollout.DeploymentRecord) -> None:
        pass

    # --- rollout.* (the kube task queue) ------------------------------------------------------------

    @activity.defn(name="rollout.apply")
    async def apply(self, params: rollout.ApplyInput) -> rollout.ApplyOutput:
        cluster, name = params.spec.cluster, dgd_name(params.spec.workload_id, params.spec.cluster)
        self._names[name] = cluster
        self.dgds[cluster] = params.spec.worker.replicas
        self.generations[cluster] = self.generations.get(cluster, 0) + 1
        self.applied_generations[cluster] = self.generations[cluster]
        self.log.append(f"apply {cluster} {params.spec.worker.replicas}")
        return rollout.ApplyOutput(name=name, namespace=params.spec.namespace, uid=str(uuid.uuid4()),
                           generation=self.generations[cluster], resource_version="1",
                           spec_hash=self.spec_hash(cluster))

    @activity.defn(name="rollout.wait_ready")
    async def wait_ready(self, params: rollout.WaitReadyInput) -> rollout.WaitReadyOutput:
        cluster = self.cluster_of(params.name)
        while cluster in self.hold_ready:
            activity.heartbeat()  # how the cancellation reaches this activity
            await asyncio.sleep(0.1)
        if cluster in self.crash_looping:
            raise ApplicationError(f"{cluster}: pod worker-0 is in CrashLoopBackOff", type="PodCrashLooping",
                                   non_retryable=True)
        return rollout.WaitReadyOutput(name=params.name, namespace=params.namespace, generation=params.generation,
                               state="successful", waited_seconds=0, polls=1, pods_ready=1, pods_total=1)

    @activity.defn(name="rollout.probe_frontend")
    async def probe_frontend(self, params: rollout.ProbeFrontendInput) -> rollout.ProbeFrontendOutput:
        cluster = self.cluster_of(params.name or "")
        return rollout.ProbeFrontendOutput(url=f"http://{cluster}.frontend.test", models=[params.served_model_name],
                                   attempts=1, waited_seconds=0)

    @activity.defn(name="rollout.delete")
    async def delete(self, params: rollout.DeleteInput) -> rollout.DeleteOutput:
        cluster = self.cluster_of(params.name)
        if self.refuse_deletes.get(cluster, 0) > 0:
            self.refuse_deletes[cluster] -= 1
            self.log.append(f"delete {cluster} refused")
            raise ApplicationError(f"{cluster}: deletecollection is forbidden", type="Forbidden", non_retryable=True)
        existed = self.dgds.pop(cluster, None) is not None
        self.generations.pop(cluster, None)
        self.log.append(f"delete {cluster}")
        return rollout.DeleteOutput(existed=existed, waited_seconds=0)

    def spec_hash(self, cluster: str) -> str:
        return f"sha256:{cluster}-{self.dgds[cluster]}"

    def edit(self, cluster: str) -> None:
        """Someone changes the deployment's spec by hand: a new generation the plane did not apply."""
        self.generations[cluster] += 1
        self.log.append(f"edited {cluster}")

    # --- watch.* (the kube task queue) ----------------------------------------------------------------

    @activity.defn(name="workload.observe")
    async def look(self, params: workload.ObserveDeploymentInput) -> Observation:
        """Like the real look: reads every status period, answers on news or after the report period."""
        started = time.monotonic()
        seen = self._seen(params)
        while (seen.news_key() == params.known and params.cluster not in self.silent
               and time.monotonic() - started < params.report_seconds):
            await asyncio.sleep(params.status_seconds)
            seen = self._seen(params)
        if self.held_looks is not None:  # answered only once released: what it saw may be stale by then
            self.looks_waiting += 1
            try:
                await self.held_looks.wait()
            finally:
                self.looks_waiting -= 1
        if params.cluster in self.silent:
            raise ApplicationError("the look's worker went away", non_retryable=True)
        return seen

    def _seen(self, params: workload.ObserveDeploymentInput) -> Observation:
        self.looks += 1
        cluster = params.cluster
        at = datetime.now(UTC)
        if cluster in self.unreachable:
            return Observation(cluster=cluster, at=at, reachable=False, error="Unreachable: connection refused")
        if cluster not in self.dgds:
            return Observation(cluster=cluster, at=at, exists=False)
        front = FrontendCheck(url=f"http://{cluster}.frontend.test", models=[params.served_model_name]) \
            if params.served_model_name else None
        generation = self.generations[cluster]
        return Observation(cluster=cluster, at=at, exists=True, generation=generation, observed_generation=generation,
                           spec_hash=self.spec_hash(cluster), ready=True, state="successful",
                           ready_replicas=self.dgds[cluster], frontend=front)

    @activity.defn(name="workload.record_heal")
    async def record_heal(self, r: workload.HealRecord) -> None:
        self.heals.append(r)
        self.log.append(f"healed {r.cluster} {r.action}")

    # --- endpoint.* ----------------------------------------------------------------------------------

    @activity.defn(name="endpoint.observe")
    async def observe(self, params: endpoint.ObserveInput) -> EndpointRoutes:
        serving = [ServingDeployment(workload_id=w, cluster=c, replicas=n, frontend_url=f"http://{c}.frontend.test",
                                     served_model_name=params.name)
                   for w in params.workloads for c, n in sorted(self.dgds.items())]
        return routes_from_deployments(params.name, serving, [True] * len(serving),
                                       draining_workloads=params.draining, draining_backends=params.draining_backends)

    @activity.defn(name="endpoint.set_routes")
    async def set_routes(self, params: endpoint.SetRoutesInput) -> RouteStatus | None:
        if params.routes != self.routes:
            self.log.append("routes " + " ".join(f"{b.id}={b.weight}" for b in params.routes.backends))
        self.routes = params.routes
        return None

    @activity.defn(name="endpoint.wait_drained")
    async def wait_drained(self, params: endpoint.DrainInput) -> bool:
        while self.held_drains is not None and not self.held_drains.is_set():
            activity.heartbeat()
            await asyncio.sleep(0.1)
        self.log.append("drained " + " ".join(b.id for b in params.backends))
        return True

    @activity.defn(name="endpoint.record")
    async def record_endpoint(self, r: endpoint.EndpointRecord) -> None:
        if self.held_changes is not None and r.event == "endpoint_workloads_changed":
            self.changes_waiting += 1
            await self.held_changes.wait()

    @activity.defn(name="endpoint.check_workloads")
    async def check_workloads(self, params: endpoint.CheckWorkloadsInput) -> endpoint.CheckWorkloadsOutput:
        unknown = [w for w in params.workloads if w in self.unknown_workloads]
        return endpoint.CheckWorkloadsOutput(problems=[f"unknown workload(s): {', '.join(unknown)}"] if unknown else [])

    def activities(self) -> list[Callable[..., Any]]:
        return [self.list_clusters, self.place, self.record_workload, self.record_placement, self.record_deployment,
                self.apply, self.wait_ready, self.probe_frontend, self.delete, self.observe, self.set_routes,
                self.wait_drained, self.record_endpoint, self.look, self.record_heal, self.check_workloads]


@asynccontextmanager
async def fake_worker(client: Client, world: World, prefix: str = "wf") -> AsyncIterator[str]:
    """The real workflows and the fake activities on one task queue (also used as the kube queue), and
    the looks on the watch queue beside it."""
    queue = f"{prefix}-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=workflows(), activities=world.activities(),
                      workflow_runner=WORKFLOW_RUNNER), \
            Worker(client, task_queue=observe_task_queue(queue), activities=[world.look]):
        yield queue


def workload_input(queue: str, workload_id: str = "wl", replicas: int = 2, **overrides: Any) -> WorkloadWorkflowInput:
    """A small workload: one GPU per replica, 'Qwen/Qwen3-8B' served as `qwen`."""
    plan = WorkloadPlan(
        workload_id=workload_id, artifact_id=f"Qwen/Qwen3-8B@{SHA}", artifact_sha=SHA, draft_version=1,
        hf_model_id="Qwen/Qwen3-8B", hf_revision=SHA, served_model_name="qwen", engine="vllm", hardware="h200",
        layout="single_node_tp", variant="default", features=[], replicas=replicas, gpus_per_replica=1,
        worker=WorkerPool(args=["--tensor-parallel-size", "1"], gpus_per_node=1), image="vllm:test",
        namespace="default", placement=PlacementPlan(hardware="h200", gpus_per_node=1, replicas=replicas), fit={})
    return WorkloadWorkflowInput(plan=plan, requested_by="test", kube_task_queue=queue, poll_seconds=0.1,
                                 **overrides)

"""A fake world for upgrades: like `fakes.World`, but deployments are keyed by DGD name, so one
cluster holds two versions of a workload side by side; a cluster's capacity counts both. The
gateway's counters are simulated per backend: every reading adds `traffic` requests to each routed
backend in proportion to its weight, failing `error_rate[backend id]` of them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from contracts import rollout, upgrade, workload
from contracts.endpoint import ObserveInput
from tests.workflows.fakes import World, fake_worker
from wingsmith.domain.dynamo import dgd_name
from wingsmith.domain.endpoints import ServingDeployment, routes_from_deployments
from wingsmith.domain.gateway import EndpointRoutes
from wingsmith.domain.gateway.traffic import BackendCounters
from wingsmith.domain.placement.models import PlacementDecision
from wingsmith.domain.reconcile import FrontendCheck, Observation

NEW_SHA = "b" * 40
NEW_ARTIFACT = f"Qwen/Qwen3-8B@{NEW_SHA}"


@dataclass
class Deployment:
    cluster: str
    workload_id: str
    revision: int
    replicas: int
    generation: int = 1


@dataclass
class UpgradeWorld(World):
    deployments: dict[str, Deployment] = field(default_factory=dict)  # DGD name -> what runs
    splits: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # (workload, cluster) -> rev, %
    counters: dict[str, BackendCounters] = field(default_factory=dict)
    error_rate: dict[str, float] = field(default_factory=dict)  # backend id -> failed fraction
    traffic: int = 100  # requests per reading over the whole endpoint
    events: list[upgrade.UpgradeEvent] = field(default_factory=list)
    refuse_plan: str | None = None  # upgrade.plan answers with this refusal
    gateway_down: bool = False

    def on(self, cluster: str) -> dict[str, Deployment]:
        return {n: d for n, d in self.deployments.items() if d.cluster == cluster}

    @activity.defn(name="workload.place")
    async def place(self, params: workload.PlaceInput) -> PlacementDecision:
        denied, allowed = set(params.plan.constraints.denied_clusters), params.plan.constraints.allowed_clusters
        room = {c: cap - sum(d.replicas for d in self.on(c).values()) for c, cap in self.capacity.items()
                if c not in denied and (not allowed or c in allowed)}
        placed: dict[str, int] = {}
        for _ in range(params.plan.replicas):
            free = {c: r - placed.get(c, 0) for c, r in room.items() if r - placed.get(c, 0) > 0}
            if not free:
                break
            best = max(free, key=lambda c: (free[c], -ord(c[-1])))
            placed[best] = placed.get(best, 0) + 1
        total = sum(placed.values())
        return PlacementDecision(plan=params.plan, replicas=placed, placed=total, unplaced=params.plan.replicas - total,
                                 summary=f"{total} of {params.plan.replicas} placed", clusters=[])

    @activity.defn(name="workload.record_deployment")
    async def record_deployment(self, r: rollout.DeploymentRecord) -> None:
        pass

    @activity.defn(name="rollout.apply")
    async def apply(self, params: rollout.ApplyInput) -> rollout.ApplyOutput:
        s = params.spec
        name = dgd_name(s.workload_id, s.cluster, s.revision)
        self._names[name] = s.cluster
        held = self.deployments.get(name)
        generation = held.generation + 1 if held else 1
        self.deployments[name] = Deployment(s.cluster, s.workload_id, s.revision, s.worker.replicas, generation)
        self.log.append(f"apply {name} {s.worker.replicas}")
        return rollout.ApplyOutput(name=name, namespace=s.namespace, uid=str(uuid.uuid4()), generation=generation,
                           resource_version="1", spec_hash=self.hash_of(name))

    def hash_of(self, name: str) -> str:
        return f"sha256:{name}-{self.deployments[name].replicas}"

    @activity.defn(name="rollout.wait_ready")
    async def wait_ready(self, params: rollout.WaitReadyInput) -> rollout.WaitReadyOutput:
        while params.name in self.hold_ready:  # never ready until cancelled
            activity.heartbeat()
            await asyncio.sleep(0.1)
        if params.name in self.crash_looping:
            raise ApplicationError(f"pod of {params.name} is in CrashLoopBackOff", type="PodCrashLooping",
                                   non_retryable=True)
        return rollout.WaitReadyOutput(name=params.name, namespace=params.namespace, generation=params.generation,
                               state="successful", waited_seconds=0, polls=1, pods_ready=1, pods_total=1)

    @activity.defn(name="rollout.probe_frontend")
    async def probe_frontend(self, params: rollout.ProbeFrontendInput) -> rollout.ProbeFrontendOutput:
        return rollout.ProbeFrontendOutput(url=f"http://{params.name}.test", models=[params.served_model_name],
                                           attempts=1, waited_seconds=0)

    @activity.defn(name="rollout.delete")
    async def delete(self, params: rollout.DeleteInput) -> rollout.DeleteOutput:
        existed = self.deployments.pop(params.name, None) is not None
        self.log.append(f"delete {params.name}")
        return rollout.DeleteOutput(existed=existed, waited_seconds=0)

    def _seen(self, params: workload.ObserveDeploymentInput) -> Observation:
        self.looks += 1
        at = datetime.now(UTC)
        d = self.deployments.get(params.name)
        if d is None:
            return Observation(cluster=params.cluster, at=at, exists=False)
        front = FrontendCheck(url=f"http://{params.name}.test", models=[params.served_model_name]) \
            if params.served_model_name else None
        return Observation(cluster=params.cluster, at=at, exists=True, generation=d.generation,
                           observed_generation=d.generation, spec_hash=self.hash_of(params.name), ready=True,
                           state="successful", ready_replicas=d.replicas, frontend=front)

    @activity.defn(name="endpoint.observe")
    async def observe(self, params: ObserveInput) -> EndpointRoutes:
        serving = []
        for name, d in sorted(self.deployments.items(), key=lambda kv: (kv[1].cluster, kv[1].revision)):
            if d.workload_id not in params.workloads:
                continue
            split = self.splits.get((d.workload_id, d.cluster))
            percent = None if split is None else (split[1] if split[0] == d.revision else 100 - split[1])
            serving.append(ServingDeployment(workload_id=d.workload_id, cluster=d.cluster, replicas=d.replicas,
                                             frontend_url=f"http://{name}.test", served_model_name=params.name,
                                             revision=d.revision, split_percent=percent))
        return routes_from_deployments(params.name, serving, [True] * len(serving),
                                       draining_workloads=params.draining, draining_backends=params.draining_backends)

    @activity.defn(name="upgrade.plan")
    async def plan(self, params: upgrade.PlanUpgradeInput) -> upgrade.PlanUpgradeOutput:
        if self.refuse_plan:
            return upgrade.PlanUpgradeOutput(kind="ArtifactNotUpgradable", problem=self.refuse_plan)
        sha = params.request.artifact_id.rsplit("@", 1)[1]
        return upgrade.PlanUpgradeOutput(plan=params.current.model_copy(update={
            "artifact_id": params.request.artifact_id, "artifact_sha": sha, "hf_revision": sha,
            "revision": params.current.revision + 1}))

    @activity.defn(name="upgrade.set_split")
    async def set_split(self, params: upgrade.SplitInput) -> None:
        key = (params.workload_id, params.cluster)
        if params.percent is None:
            self.splits.pop(key, None)
        else:
            self.splits[key] = (params.revision, params.percent)
        self.log.append(f"split {params.cluster} r{params.revision}={params.percent}")

    @activity.defn(name="upgrade.read_counters")
    async def read_counters(self, params: upgrade.CountersInput) -> upgrade.CountersOutput:
        """Traffic since the last reading, shared by the routed weights, then the cumulative counters."""
        if self.gateway_down:
            raise ApplicationError("the gateway's metrics did not answer", type="GatewayUnreadable")
        weights = {b.id: b.weight for b in (self.routes.backends if self.routes else [])}
        total = sum(weights.values()) or 1
        for backend, weight in weights.items():
            c = self.counters.setdefault(backend, BackendCounters())
            n = self.traffic * weight // total
            failed = round(n * self.error_rate.get(backend, 0.0))
            c.requests += n
            c.failures += failed
            c.duration = {0.1: c.duration.get(0.1, 0) + n, float("inf"): c.duration.get(float("inf"), 0) + n}
        return upgrade.CountersOutput(counters={b: self.counters.get(b, BackendCounters()).model_copy(deep=True)
                                        for b in params.backends})

    @activity.defn(name="upgrade.record")
    async def record_upgrade(self, e: upgrade.UpgradeEvent) -> None:
        self.events.append(e)

    def activities(self) -> list[Callable[..., Any]]:
        return [*super().activities(), self.plan, self.set_split, self.read_counters, self.record_upgrade]


@asynccontextmanager
async def upgrade_worker(client: Client, world: UpgradeWorld) -> AsyncIterator[str]:
    async with fake_worker(client, world, prefix="up") as queue:
        yield queue

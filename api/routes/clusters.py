"""The cluster registry and what-if placement.

- `POST /v1/clusters` (admin): register a cluster; the same settings again is a no-op (200), other
  settings under a taken name are a conflict (409). Either way its preflight runs (api/cluster_check.py)
  and the answer carries the checklist: a failing line keeps the cluster registered but unplaceable.
- `POST /v1/clusters/{name}/check` (admin): run the preflight again; a passing check makes it placeable.
- `GET /v1/clusters`, `GET /v1/clusters/{name}` (viewer).
- `PATCH /v1/clusters/{name}` (admin): change what can change in place; today `cost_per_gpu_hour`
  (a number, or null to forget it). Other settings name another cluster: remove and register it again.
- `DELETE /v1/clusters/{name}` (admin): refused (409) while deployments live on the cluster.
- `POST /v1/clusters/{name}/cordon|uncordon` (admin): a cordoned cluster takes no new replicas.
- `POST /v1/placements/dry-run` (viewer): the placement decision for a plan, writing nothing. Viewer,
  because it changes nothing and only shows what the registry and clusters already show; it may
  read clusters' live inventories, which a viewer of the plane may see. Those reads run in the worker
  (LiveInventoryWorkflow on the kube task queue): the API process never loads a kubeconfig. A viewer
  must not be able to make the plane read clusters without bound: an inventory read in the last
  LIVE_CACHE_SECONDS is reused, a read already under way is shared, and at most LIVE_READS_AT_ONCE
  reads run at once per API process; beyond that the answer is 429 with Retry-After.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import time
import uuid
from datetime import timedelta
from pathlib import Path

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from api.auth import Admin, Viewer
from api.cluster_check import ClusterChecked, check_and_record
from api.deps import DbDep, SettingsDep
from api.errors import ApiError
from contracts import inventory as inventory_contract
from contracts.inventory import InventoryTarget, LiveInventoryInput
from wingsmith.config import Settings
from wingsmith.kube import KubeError
from wingsmith.kube.kubeconfig import KubeconfigBeyondLimit, KubeconfigPolicy, check_reference, read_source
from wingsmith.kube.kubeconfig_check import check_in_child
from wingsmith.placement import (
    EXPLAIN_EVERY_CLUSTER_UP_TO,
    ClusterInventory,
    PlacementDecision,
    PlacementInputError,
    PlacementPlan,
    place,
)
from wingsmith.store import clusters as store
from wingsmith.store.clusters import ClusterExists, ClusterInUse, ClusterRecord, ClusterSpec, CostPerGpuHour
from wingsmith.text import MAX_LIST, MAX_POOLS, NameText

router = APIRouter(prefix="/v1", tags=["clusters"])

# A dry run must answer even when a cluster does not: its inventory is then an error, explained.
LIVE_READ_TIMEOUT_SECONDS = 20.0
LIVE_CACHE_SECONDS = 5.0
LIVE_READS_AT_ONCE = 2
# Parsing a kubeconfig is CPU work, bounded by the loader's limits (~0.2 s to refuse one past them, ~0.7 s
# for one just within), done in a child process; registrations sent together beyond this many queue, so
# they cannot take every core of the API's machine.
KUBECONFIG_CHECKS_AT_ONCE = 2


class ClusterList(BaseModel):
    clusters: list[ClusterRecord]


@router.post("/clusters", status_code=201, response_model=ClusterChecked)
async def register_cluster(spec: ClusterSpec, db: DbDep, _who: Admin, response: Response,
                           settings: SettingsDep, request: Request) -> ClusterChecked:
    await check_kubeconfig_off_the_loop(request, spec, settings)
    try:
        record, created = await store.create_cluster(db, spec)
    except ClusterExists as exc:
        raise ApiError(409, str(exc), details={"name": spec.name}) from None
    if not created:
        response.status_code = 200
    return await check_and_record(request, settings, db, record)


@router.post("/clusters/{name}/check", response_model=ClusterChecked)
async def check_cluster(name: str, db: DbDep, _who: Admin, settings: SettingsDep, request: Request) -> ClusterChecked:
    return await check_and_record(request, settings, db, _found(name, await store.get_cluster(db, name)))


@router.get("/clusters", response_model=ClusterList)
async def list_clusters(db: DbDep, _who: Viewer) -> ClusterList:
    return ClusterList(clusters=await store.list_clusters(db))


@router.get("/clusters/{name}", response_model=ClusterRecord)
async def show_cluster(name: str, db: DbDep, _who: Viewer) -> ClusterRecord:
    return _found(name, await store.get_cluster(db, name))


class ClusterUpdate(BaseModel):
    """What `PATCH /v1/clusters/{name}` may change. A field left out is left as it is; null forgets it."""
    model_config = ConfigDict(extra="forbid")

    cost_per_gpu_hour: CostPerGpuHour = None


@router.patch("/clusters/{name}", response_model=ClusterRecord)
async def update_cluster(name: str, body: ClusterUpdate, db: DbDep, _who: Admin) -> ClusterRecord:
    if "cost_per_gpu_hour" not in body.model_fields_set:
        raise ApiError(422, "nothing to change: send cost_per_gpu_hour (a number, or null to forget it)",
                       code="nothing_to_change", details={"field": "cost_per_gpu_hour"})
    return _found(name, await store.set_cost(db, name, body.cost_per_gpu_hour))


@router.delete("/clusters/{name}", status_code=204, response_class=Response, response_model=None)
async def remove_cluster(name: str, db: DbDep, _who: Admin) -> Response:
    try:
        deleted = await store.delete_cluster(db, name)
    except ClusterInUse as exc:
        raise ApiError(409, str(exc), details={"workloads": exc.workloads}) from None
    if not deleted:
        raise ApiError(404, f"cluster {name!r} is not registered")
    return Response(status_code=204)


@router.post("/clusters/{name}/cordon", response_model=ClusterRecord)
async def cordon_cluster(name: str, db: DbDep, _who: Admin) -> ClusterRecord:
    return _found(name, await store.set_cordoned(db, name, True))


@router.post("/clusters/{name}/uncordon", response_model=ClusterRecord)
async def uncordon_cluster(name: str, db: DbDep, _who: Admin) -> ClusterRecord:
    return _found(name, await store.set_cordoned(db, name, False))


class DryRunRequest(BaseModel):
    plan: PlacementPlan
    clusters: list[NameText] | None = Field(default=None, max_length=MAX_LIST,
                                            description="only these registered clusters; default: all")
    inventories: list[ClusterInventory] = Field(
        default_factory=list, max_length=MAX_LIST, description="what-if inventories that replace the clusters' own")
    live: bool = Field(default=True, description="read live inventories of clusters without a manual or "
                                                 "what-if inventory; false: those clusters have none")
    explain: list[NameText] | None = Field(
        default=None, max_length=MAX_LIST,
        description="clusters to explain in full (every filter, every score term) besides those that would "
                    f"receive replicas; default: every cluster on a fleet of up to {EXPLAIN_EVERY_CLUSTER_UP_TO:,} "
                    "clusters, none on a larger one (those are grouped by the first filter they fail)")


    @field_validator("inventories")
    @classmethod
    def _bounded_pools(cls, value: list[ClusterInventory]) -> list[ClusterInventory]:
        for inventory in value:
            if len(inventory.pools) > MAX_POOLS:
                raise ValueError(f"inventory of {inventory.cluster} has {len(inventory.pools)} pools; "
                                 f"at most {MAX_POOLS} per cluster")
        return value


class DryRunResponse(BaseModel):
    decision: PlacementDecision
    inventories: list[ClusterInventory] = Field(description="the inventories the decision used")


@router.post("/placements/dry-run", response_model=DryRunResponse)
async def dry_run(body: DryRunRequest, db: DbDep, _who: Viewer, request: Request,
                  settings: SettingsDep) -> DryRunResponse:
    records = await store.list_clusters(db)
    if body.clusters is not None:
        known = {r.name for r in records}
        unknown = sorted(set(body.clusters) - known)
        if unknown:
            raise ApiError(404, f"unknown cluster(s): {', '.join(unknown)}", details={"unknown": unknown})
        records = [r for r in records if r.name in set(body.clusters)]
    given = {inv.cluster for inv in body.inventories}
    inventories = list(body.inventories)
    live = []
    for record in records:
        if record.name in given:
            continue
        if record.manual_inventory is not None:
            inventories.append(record.manual_inventory.to_inventory(record.name))
        elif body.live:
            live.append(record)
    inventories += await _live_reads(request).inventories(getattr(request.app.state, "temporal", None),
                                                         settings, live)
    try:
        decision = place(body.plan, inventories, [r.info() for r in records],
                         explain=_explained(body, records, inventories))
    except PlacementInputError as exc:
        raise ApiError(422, str(exc)) from None
    return DryRunResponse(decision=decision, inventories=sorted(inventories, key=lambda i: i.cluster))


def _explained(body: DryRunRequest, records: list[ClusterRecord],
               inventories: list[ClusterInventory]) -> bool | list[str]:
    """Which clusters the dry run explains in full: the ones asked for, else every cluster of a small fleet
    (the decisions workflows record explain only the clusters that receive replicas)."""
    fleet = {r.name for r in records} | {i.cluster for i in inventories}
    if body.explain is None:
        return len(fleet) <= EXPLAIN_EVERY_CLUSTER_UP_TO
    unknown = sorted(set(body.explain) - fleet)
    if unknown:
        raise ApiError(404, f"cannot explain unknown cluster(s): {', '.join(unknown)}", details={"unknown": unknown})
    return body.explain


_Key = tuple[str, str, str]


def _key(record: ClusterRecord) -> _Key:
    # A re-registered cluster (another kubeconfig or context) is another cluster to read.
    return (record.name, record.kubeconfig, record.kube_context)


class LiveReads:
    """Recent live inventories of one API process, the reads under way, and the bound on them."""

    def __init__(self, max_age: float = LIVE_CACHE_SECONDS, at_once: int = LIVE_READS_AT_ONCE):
        self.max_age, self.at_once = max_age, at_once
        self._recent: dict[_Key, tuple[float, ClusterInventory]] = {}
        self._pending: dict[_Key, asyncio.Future[dict[str, ClusterInventory]]] = {}
        self._running = 0

    async def inventories(self, temporal: Client | None, settings: Settings,
                          records: list[ClusterRecord]) -> list[ClusterInventory]:
        now = time.monotonic()
        self._recent = {k: v for k, v in self._recent.items() if now - v[0] < self.max_age}
        found = [self._recent[_key(r)][1] for r in records if _key(r) in self._recent]
        unread = [r for r in records if _key(r) not in self._recent]
        shared = [(r, self._pending[_key(r)]) for r in unread if _key(r) in self._pending]
        todo = [r for r in unread if _key(r) not in self._pending]
        if todo:
            found += await self._read(temporal, settings, todo)
        for record, future in shared:
            inventory = (await asyncio.shield(future)).get(record.name)
            found.append(inventory or ClusterInventory(cluster=record.name, error="the shared live read failed"))
        return found

    async def _read(self, temporal: Client | None, settings: Settings,
                    records: list[ClusterRecord]) -> list[ClusterInventory]:
        if self._running >= self.at_once:
            raise ApiError(429, f"{self._running} live inventory reads are under way; try again shortly, or "
                                "send the inventories to test (what-if) or live=false",
                           headers={"Retry-After": str(math.ceil(self.max_age))})
        future: asyncio.Future[dict[str, ClusterInventory]] = asyncio.get_running_loop().create_future()
        for record in records:
            self._pending[_key(record)] = future
        self._running += 1
        by_name: dict[str, ClusterInventory] = {}
        try:
            read, cacheable = await live_inventories(temporal, settings, records)
            by_name = {inv.cluster: inv for inv in read}
            if cacheable:
                stamp = time.monotonic()
                self._recent.update({_key(r): (stamp, by_name[r.name]) for r in records if r.name in by_name})
            return read
        finally:
            self._running -= 1
            for record in records:
                self._pending.pop(_key(record), None)
            future.set_result(by_name)


def _live_reads(request: Request) -> LiveReads:
    state = request.app.state
    if getattr(state, "live_reads", None) is None:
        state.live_reads = LiveReads()
    return state.live_reads


async def live_inventories(temporal: Client | None, settings: Settings,
                           records: list[ClusterRecord]) -> tuple[list[ClusterInventory], bool]:
    """The clusters' live inventories, read by the worker (LiveInventoryWorkflow), never here: the API
    process builds no Kubernetes client. Each cluster that cannot be read says why. And whether the
    answer may be reused: not when no worker was there to read (one may start any moment)."""
    if not records:
        return [], True
    missing = await missing_worker(temporal, settings)
    if missing:
        return [ClusterInventory(cluster=r.name, error=missing) for r in records], False
    assert temporal is not None
    params = LiveInventoryInput(targets=[InventoryTarget(cluster=r.name, kubeconfig=r.kubeconfig_ref())
                                         for r in records], kube_task_queue=settings.kube_task_queue)
    names = [r.name for r in records]
    summary, details = inventory_contract.live_inventory_summary(names)
    try:
        result = await temporal.execute_workflow(
            inventory_contract.WORKFLOW, params, result_type=inventory_contract.LiveInventoryResult,
            id=inventory_contract.live_inventory_workflow_id(names, uuid.uuid4().hex[:12]),
            task_queue=settings.task_queue, execution_timeout=timedelta(seconds=LIVE_READ_TIMEOUT_SECONDS),
            static_summary=summary, static_details=details)
    except (WorkflowFailureError, RPCError) as exc:
        reason = f"no answer from the worker within {LIVE_READ_TIMEOUT_SECONDS:g}s ({type(exc).__name__})"
        return [ClusterInventory(cluster=r.name, error=reason) for r in records], False
    return result.inventories, True


async def missing_worker(temporal: Client | None, settings: Settings) -> str | None:
    """Why no worker can read inventories now, or None. Asked first so a plane without a worker
    answers at once instead of after the timeout."""
    if temporal is None:
        return "Temporal is not reachable; live inventories are read by the worker"
    for queue, kind, what in ((settings.task_queue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, "workflows"),
                              (settings.kube_task_queue, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, "Kubernetes reads")):
        try:
            described = await temporal.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
                namespace=temporal.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind))
        except RPCError as exc:
            return f"Temporal could not describe task queue {queue}: {exc.message}"
        if not described.pollers:
            return f"no worker is polling task queue {queue} ({what}); live inventories are read by the worker"
    return None


async def check_kubeconfig_off_the_loop(request: Request, spec: ClusterSpec, settings: Settings) -> None:
    """The reference's syntax and a file's place always; the content too when it is readable here (a
    file on this machine, a variable in this process), read in a thread and parsed and checked in a
    child process (wingsmith/kube/kubeconfig_check.py), never on the event loop. The worker's loader
    checks everything again before it builds any client: the content may live only where the worker runs."""
    policy = KubeconfigPolicy.from_settings(settings)
    state = request.app.state
    if getattr(state, "kubeconfig_checks", None) is None:
        state.kubeconfig_checks = asyncio.Semaphore(KUBECONFIG_CHECKS_AT_ONCE)
    try:
        source = check_reference(spec.kubeconfig, policy)
        here = (source.kind == "file" and source.path is not None and _on_this_machine(source.path)) or (
            source.kind == "env" and bool(os.environ.get(source.env)))
        if not here:
            return
        async with state.kubeconfig_checks:
            content = await asyncio.to_thread(read_source, source, policy)
            await asyncio.to_thread(check_in_child, content, spec.kube_context or None, policy, source)
    except KubeError as exc:
        # "KubeconfigPathList" -> "kubeconfig_path_list": the code names the reason.
        code = re.sub(r"(?<!^)(?=[A-Z])", "_", exc.type).lower()
        details: dict[str, object] = {"field": "kubeconfig"}
        if isinstance(exc, KubeconfigBeyondLimit):
            details |= {"limit": exc.limit, "bound": exc.bound}
        raise ApiError(422, exc.message, code=code, details=details) from None


def _on_this_machine(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long for this file system: the loader names the error (422)
        return True


def _found(name: str, record: ClusterRecord | None) -> ClusterRecord:
    if record is None:
        raise ApiError(404, f"cluster {name!r} is not registered")
    return record

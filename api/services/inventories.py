"""The clusters' live inventories, read by the worker (LiveInventoryWorkflow on the kube task queue), never by
the API process, which builds no Kubernetes client.

Anyone who may view the plane may ask for a placement dry run, which reads clusters: that must not make the
plane read clusters without bound. So an inventory read in the last LIVE_CACHE_SECONDS is reused, a read
already under way is shared, and at most LIVE_READS_AT_ONCE reads run at once per API process; beyond that
the answer is 429 with Retry-After.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from api.errors import ApiError
from contracts import inventory as inventory_contract
from contracts.inventory import InventoryTarget, LiveInventoryInput
from wingsmith.adapters.store.clusters import ClusterRecord
from wingsmith.domain.config import Settings
from wingsmith.domain.placement import ClusterInventory

# A dry run must answer even when a cluster does not: its inventory is then an error, explained.
LIVE_READ_TIMEOUT_SECONDS = 20.0
LIVE_CACHE_SECONDS = 5.0
LIVE_READS_AT_ONCE = 2

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


async def live_inventories(temporal: Client | None, settings: Settings,
                           records: list[ClusterRecord]) -> tuple[list[ClusterInventory], bool]:
    """The clusters' live inventories, read by the worker. Each cluster that cannot be read says why. And
    whether the answer may be reused: not when no worker was there to read (one may start any moment)."""
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

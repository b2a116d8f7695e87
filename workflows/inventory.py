"""LiveInventoryWorkflow (`inventory/<clusters>/<nonce>`): read some clusters' live GPU inventories for a placement
dry run, on the kube task queue, and return them.

It exists so that the API process never builds a Kubernetes client: a kubeconfig can carry credentials
and credential plugins, and only the worker that rolls out should ever load one. Reads only, so a
retried or repeated run changes nothing; short timeouts, because a person is waiting on the answer.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contracts import inventory as contract
from contracts.inventory import (
    ACTIVITY_READ_INVENTORY,
    InventoryTarget,
    LiveInventoryInput,
    LiveInventoryResult,
    ReadInventoryInput,
)
from wingsmith.domain.placement.models import ClusterInventory
from workflows import policies


@workflow.defn(name=contract.WORKFLOW)
class LiveInventoryWorkflow:
    @workflow.run
    async def run(self, params: LiveInventoryInput) -> LiveInventoryResult:
        read = [self._read(t, params) for t in params.targets]
        return LiveInventoryResult(inventories=list(await asyncio.gather(*read)))

    async def _read(self, target: InventoryTarget, params: LiveInventoryInput) -> ClusterInventory:
        try:
            return await workflow.execute_activity(
                ACTIVITY_READ_INVENTORY, ReadInventoryInput(cluster=target.cluster, kubeconfig=target.kubeconfig),
                result_type=ClusterInventory,
                **policies.live_inventory_read(params.kube_task_queue, params.read_timeout_seconds))
        except ActivityError as err:
            # One unreadable cluster is explained, not fatal: the dry run still places on the others.
            cause = getattr(err.cause, "message", None) or str(err)
            return ClusterInventory(cluster=target.cluster, error=f"unreadable: {cause}")

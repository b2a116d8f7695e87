"""LiveInventoryWorkflow (`inventory/<uuid>`): read some clusters' live GPU inventories for a placement
dry run, on the kube task queue, and return them.

It exists so that the API process never builds a Kubernetes client: a kubeconfig can carry credentials
and credential plugins, and only the worker that rolls out should ever load one. Reads only, so a
retried or repeated run changes nothing; short timeouts, because a person is waiting on the answer.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contracts.inventory import InventoryTarget, LiveInventoryInput, LiveInventoryResult

with workflow.unsafe.imports_passed_through():
    from activities.inventory import ReadInventoryInput, read_inventory
    from wingsmith.placement.models import ClusterInventory


@workflow.defn
class LiveInventoryWorkflow:
    @workflow.run
    async def run(self, params: LiveInventoryInput) -> LiveInventoryResult:
        read = [self._read(t, params) for t in params.targets]
        return LiveInventoryResult(inventories=list(await asyncio.gather(*read)))

    async def _read(self, target: InventoryTarget, params: LiveInventoryInput) -> ClusterInventory:
        try:
            return await workflow.execute_activity(
                read_inventory, ReadInventoryInput(cluster=target.cluster, kubeconfig=target.kubeconfig),
                task_queue=params.kube_task_queue,
                start_to_close_timeout=timedelta(seconds=params.read_timeout_seconds),
                retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=200)))
        except ActivityError as err:
            # One unreadable cluster is explained, not fatal: the dry run still places on the others.
            cause = getattr(err.cause, "message", None) or str(err)
            return ClusterInventory(cluster=target.cluster, error=f"unreadable: {cause}")

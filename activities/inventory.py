"""Temporal activity: read one cluster's live GPU inventory.

Sync (the kubernetes client blocks): run it on a worker with a thread-pool `activity_executor`,
on the kube task queue. The input names where the kubeconfig lives; the client, and with it any
credential, exists only while the activity runs.

A cluster that answers but cannot be read for a reason retrying will not fix (missing kubeconfig,
forbidden) comes back as an inventory with `error` set, so placement explains that cluster instead of
failing the whole placement; transient failures raise, and the activity's retry policy takes over.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from contracts.inventory import ACTIVITY_READ_INVENTORY, ReadInventoryInput
from wingsmith.adapters.kube import KubeError, shared_api_client
from wingsmith.domain.placement.models import ClusterInventory


@activity.defn(name=ACTIVITY_READ_INVENTORY)
def read_inventory(input: ReadInventoryInput) -> ClusterInventory:
    from wingsmith.adapters.inventory import read_inventory as read

    try:
        return read(shared_api_client(input.kubeconfig), input.cluster)  # shared: never closed here
    except KubeError as err:
        if err.retryable:
            raise ApplicationError(err.message, type=err.type) from None
        activity.logger.warning("inventory of %s not readable: %s", input.cluster, err.type)
        return ClusterInventory(cluster=input.cluster, error=str(err))

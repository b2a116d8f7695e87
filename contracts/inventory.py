"""The live inventory's contract: read the GPU nodes of some clusters at once (the API's
`GET /v1/clusters?live=true`), through the kube task queue; and its one activity, which the workload's
placement calls too."""

from __future__ import annotations

from pydantic import BaseModel, Field

from wingsmith.kube_ref import KubeconfigRef
from wingsmith.placement.models import ClusterInventory

WORKFLOW = "LiveInventoryWorkflow"
ACTIVITY_READ_INVENTORY = "read_inventory"  # ReadInventoryInput -> ClusterInventory (activities/inventory.py)


class InventoryTarget(BaseModel):
    cluster: str
    kubeconfig: KubeconfigRef


class LiveInventoryInput(BaseModel):
    targets: list[InventoryTarget]
    kube_task_queue: str
    read_timeout_seconds: float = Field(default=8.0, gt=0)


class LiveInventoryResult(BaseModel):
    inventories: list[ClusterInventory]


class ReadInventoryInput(BaseModel):
    cluster: str = Field(min_length=1)
    kubeconfig: KubeconfigRef

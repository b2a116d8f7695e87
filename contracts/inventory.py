"""The live inventory's contract: read the GPU nodes of some clusters at once (the API's
`GET /v1/clusters?live=true`), through the kube task queue; and its one activity, which the workload's
placement calls too."""

from __future__ import annotations

from pydantic import BaseModel, Field

from wingsmith.domain.kube_ref import KubeconfigRef
from wingsmith.domain.placement.models import ClusterInventory

WORKFLOW = "LiveInventoryWorkflow"
ACTIVITY_READ_INVENTORY = "read_inventory"  # ReadInventoryInput -> ClusterInventory (activities/inventory.py)


_NAMED_IN_ID = 3  # cluster names an id carries; the summary and details name them all


def live_inventory_workflow_id(clusters: list[str], nonce: str) -> str:
    """`inventory/<clusters>/<nonce>`: what a run read is readable in the Temporal UI's list (the nonce
    keeps two dry runs of the same clusters apart)."""
    names = sorted(clusters)
    shown = ",".join(names[:_NAMED_IN_ID]) + (f",+{len(names) - _NAMED_IN_ID}" if len(names) > _NAMED_IN_ID else "")
    return f"inventory/{shown or 'none'}/{nonce}"


def live_inventory_summary(clusters: list[str]) -> tuple[str, str]:
    """The static summary and details a run starts with (the Temporal UI shows them on the run)."""
    names = sorted(clusters)
    return (f"Live GPU inventory of {len(names)} cluster(s): {', '.join(names[:_NAMED_IN_ID])}"
            + (f" and {len(names) - _NAMED_IN_ID} more" if len(names) > _NAMED_IN_ID else "") + " (placement dry run)",
            "Reads the GPU nodes of these clusters for a placement dry run, on the kube task queue; "
            "reads only, nothing is changed.\n\n" + "\n".join(f"- {n}" for n in names))


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

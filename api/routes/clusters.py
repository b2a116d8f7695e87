"""The cluster registry and what-if placement.

- `POST /v1/clusters` (admin): register a cluster; the same settings again is a no-op (200), other
  settings under a taken name are a conflict (409).
- `GET /v1/clusters`, `GET /v1/clusters/{name}` (viewer).
- `DELETE /v1/clusters/{name}` (admin): refused (409) while deployments live on the cluster.
- `POST /v1/clusters/{name}/cordon|uncordon` (admin): a cordoned cluster takes no new replicas.
- `POST /v1/placements/dry-run` (viewer): the placement decision for a plan, writing nothing. Viewer,
  because it changes nothing and only shows what the registry and clusters already show; it may
  read clusters' live inventories, which a viewer of the plane may see.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from api.auth import Admin, Viewer
from api.deps import DbDep, SettingsDep
from api.errors import ApiError
from wingsmith.config import Settings
from wingsmith.kube import KubeError
from wingsmith.kube.plugins import check_credential_plugins
from wingsmith.placement import ClusterInventory, PlacementDecision, PlacementInputError, PlacementPlan, place
from wingsmith.store import clusters as store
from wingsmith.store.clusters import ClusterExists, ClusterInUse, ClusterRecord, ClusterSpec
from wingsmith.text import MAX_LIST, NameText

router = APIRouter(prefix="/v1", tags=["clusters"])

# A dry run must answer even when a cluster does not: its inventory is then an error, explained.
LIVE_READ_TIMEOUT_SECONDS = 10.0


class ClusterList(BaseModel):
    clusters: list[ClusterRecord]


@router.post("/clusters", status_code=201, response_model=ClusterRecord)
async def register_cluster(spec: ClusterSpec, db: DbDep, _who: Admin, response: Response,
                           settings: SettingsDep) -> ClusterRecord:
    _refuse_credential_plugins(spec, settings)
    try:
        record, created = await store.create_cluster(db, spec)
    except ClusterExists as exc:
        raise ApiError(409, str(exc), details={"name": spec.name}) from None
    if not created:
        response.status_code = 200
    return record


@router.get("/clusters", response_model=ClusterList)
async def list_clusters(db: DbDep, _who: Viewer) -> ClusterList:
    return ClusterList(clusters=await store.list_clusters(db))


@router.get("/clusters/{name}", response_model=ClusterRecord)
async def show_cluster(name: str, db: DbDep, _who: Viewer) -> ClusterRecord:
    return _found(name, await store.get_cluster(db, name))


@router.delete("/clusters/{name}", status_code=204)
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
        default_factory=list, description="what-if inventories that replace the clusters' own")
    live: bool = Field(default=True, description="read live inventories of clusters without a manual or "
                                                 "what-if inventory; false: those clusters have none")


class DryRunResponse(BaseModel):
    decision: PlacementDecision
    inventories: list[ClusterInventory] = Field(description="the inventories the decision used")


@router.post("/placements/dry-run", response_model=DryRunResponse)
async def dry_run(body: DryRunRequest, db: DbDep, _who: Viewer) -> DryRunResponse:
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
    inventories += await asyncio.gather(*(_read_live(r) for r in live))
    try:
        decision = place(body.plan, inventories, [r.info() for r in records])
    except PlacementInputError as exc:
        raise ApiError(422, str(exc)) from None
    return DryRunResponse(decision=decision, inventories=sorted(inventories, key=lambda i: i.cluster))


async def _read_live(record: ClusterRecord) -> ClusterInventory:
    def read() -> ClusterInventory:
        from wingsmith.inventory import read_inventory
        from wingsmith.kube import new_api_client
        api_client = new_api_client(record.kubeconfig_ref())
        try:
            return read_inventory(api_client, record.name)
        finally:
            api_client.close()

    try:
        return await asyncio.wait_for(asyncio.to_thread(read), timeout=LIVE_READ_TIMEOUT_SECONDS)
    except TimeoutError:
        return ClusterInventory(cluster=record.name, error=f"no answer within {LIVE_READ_TIMEOUT_SECONDS:g}s")
    except Exception as exc:  # noqa: BLE001 - KubeError messages are already free of credentials
        from wingsmith.kube import KubeError
        message = str(exc) if isinstance(exc, KubeError) else type(exc).__name__
        return ClusterInventory(cluster=record.name, error=message)


def _refuse_credential_plugins(spec: ClusterSpec, settings: Settings) -> None:
    """A kubeconfig whose user runs a program is refused here when the API can read the file; the
    worker checks again before it builds any client (the file lives on the worker's machine)."""
    path = Path(spec.kubeconfig).expanduser()
    if not path.is_file():
        return
    try:
        check_credential_plugins(path, spec.kube_context or None, settings.kubeconfig_exec_allow)
    except KubeError as exc:
        code = "kubeconfig_exec_refused" if exc.type == "KubeconfigExecRefused" else "invalid_kubeconfig"
        raise ApiError(422, exc.message, code=code, details={"field": "kubeconfig"}) from None


def _found(name: str, record: ClusterRecord | None) -> ClusterRecord:
    if record is None:
        raise ApiError(404, f"cluster {name!r} is not registered")
    return record

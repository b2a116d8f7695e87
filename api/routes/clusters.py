"""The cluster registry and what-if placement (the use cases: api/services/clusters.py, planning.py).

- `POST /v1/clusters` (admin): register a cluster; the same settings again is a no-op (200), other
  settings under a taken name are a conflict (409). Either way its preflight runs
  (api/services/cluster_checks.py) and the answer carries the checklist: a failing line keeps the cluster
  registered but unplaceable.
- `POST /v1/clusters/{name}/check` (admin): run the preflight again; a passing check makes it placeable.
- `GET /v1/clusters`, `GET /v1/clusters/{name}` (viewer).
- `PATCH /v1/clusters/{name}` (admin): change what can change in place; today `cost_per_gpu_hour`
  (a number, or null to forget it). Other settings name another cluster: remove and register it again.
- `DELETE /v1/clusters/{name}` (admin): refused (409) while deployments live on the cluster.
- `POST /v1/clusters/{name}/cordon|uncordon` (admin): a cordoned cluster takes no new replicas.
- `POST /v1/placements/dry-run` (viewer): the placement decision for a plan, writing nothing. Viewer,
  because it changes nothing and only shows what the registry and clusters already show; it may
  read clusters' live inventories, which a viewer of the plane may see. Those reads run in the worker
  (LiveInventoryWorkflow on the kube task queue): the API process never loads a kubeconfig, and they are
  bounded per API process (api/services/inventories.py): beyond the bound the answer is 429 with Retry-After.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict

from api.auth import Admin, Viewer
from api.deps import ClusterChecksDep, DbDep, LiveReadsDep, MaybeTemporalDep, SettingsDep
from api.errors import ApiError
from api.responses import ClusterList, DryRunResponse
from api.services import clusters as service
from api.services import planning
from api.services.cluster_checks import ClusterChecked
from api.services.planning import DryRunRequest
from wingsmith.adapters.store import clusters as store
from wingsmith.adapters.store.clusters import ClusterRecord, ClusterSpec, CostPerGpuHour

router = APIRouter(prefix="/v1", tags=["clusters"])


@router.post("/clusters", status_code=201, response_model=ClusterChecked)
async def register_cluster(spec: ClusterSpec, db: DbDep, _who: Admin, response: Response, settings: SettingsDep,
                           temporal: MaybeTemporalDep, checks: ClusterChecksDep) -> ClusterChecked:
    checked, created = await service.register(spec, db=db, temporal=temporal, settings=settings, checks=checks)
    if not created:
        response.status_code = 200
    return checked


@router.post("/clusters/{name}/check", response_model=ClusterChecked)
async def check_cluster(name: str, db: DbDep, _who: Admin, settings: SettingsDep, temporal: MaybeTemporalDep,
                        checks: ClusterChecksDep) -> ClusterChecked:
    return await service.check(name, db=db, temporal=temporal, settings=settings, checks=checks)


@router.get("/clusters", response_model=ClusterList)
async def list_clusters(db: DbDep, _who: Viewer) -> ClusterList:
    return ClusterList(clusters=await store.list_clusters(db))


@router.get("/clusters/{name}", response_model=ClusterRecord)
async def show_cluster(name: str, db: DbDep, _who: Viewer) -> ClusterRecord:
    return await service.cluster(db, name)


class ClusterUpdate(BaseModel):
    """What `PATCH /v1/clusters/{name}` may change. A field left out is left as it is; null forgets it."""
    model_config = ConfigDict(extra="forbid")

    cost_per_gpu_hour: CostPerGpuHour = None


@router.patch("/clusters/{name}", response_model=ClusterRecord)
async def update_cluster(name: str, body: ClusterUpdate, db: DbDep, _who: Admin) -> ClusterRecord:
    if "cost_per_gpu_hour" not in body.model_fields_set:
        raise ApiError(422, "nothing to change: send cost_per_gpu_hour (a number, or null to forget it)",
                       code="nothing_to_change", details={"field": "cost_per_gpu_hour"})
    return await service.set_cost(db, name, body.cost_per_gpu_hour)


@router.delete("/clusters/{name}", status_code=204, response_class=Response, response_model=None)
async def remove_cluster(name: str, db: DbDep, _who: Admin) -> Response:
    await service.remove(db, name)
    return Response(status_code=204)


@router.post("/clusters/{name}/cordon", response_model=ClusterRecord)
async def cordon_cluster(name: str, db: DbDep, _who: Admin) -> ClusterRecord:
    return await service.set_cordoned(db, name, True)


@router.post("/clusters/{name}/uncordon", response_model=ClusterRecord)
async def uncordon_cluster(name: str, db: DbDep, _who: Admin) -> ClusterRecord:
    return await service.set_cordoned(db, name, False)


@router.post("/placements/dry-run", response_model=DryRunResponse)
async def dry_run(body: DryRunRequest, db: DbDep, _who: Viewer, settings: SettingsDep, temporal: MaybeTemporalDep,
                  live_reads: LiveReadsDep) -> DryRunResponse:
    return await planning.dry_run(body, db=db, temporal=temporal, settings=settings, live_reads=live_reads)

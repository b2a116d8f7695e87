"""The fleet: every registered cluster with its cards, GPUs used and free, region and labels, the
workloads on it and its health as the watch last recorded it, and the teams' use against their quotas
(console/quotas.py); and one cluster's page with its deployments and its last preflight checklist, each line
with what to do, and (admins) "Check again".
Inventories are read, and checks run, by the worker (as the placement dry run does), never by the API."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from markupsafe import Markup
from pydantic import BaseModel

from api.auth import Principal
from api.deps import DbDep, SettingsDep, cluster_checks_of, live_reads_of, temporal_or_none
from api.errors import ApiError
from api.responses import answer_fields
from api.services import quotas
from api.services.cluster_checks import check_and_record
from api.services.workloads import list_workloads
from console.charts import BarRow, Segment, stacked_bars
from console.quotas import quota_chart
from console.rendering import ConsoleRoute, read_form, render
from console.session import ConsoleViewer, check_csrf, require_console
from console.words import card_name
from wingsmith.adapters.store import clusters as store
from wingsmith.adapters.store.clusters import ClusterRecord
from wingsmith.domain.placement import ClusterInventory

router = APIRouter(route_class=ConsoleRoute)
# Checking a cluster records whether it may take replicas: the registry's admins', as the API's route.
ConsoleAdmin = Annotated[Principal, Depends(require_console("admin"))]

# A page waits this long for the worker's live inventory reads, then shows the registry without them.
LIVE_WAIT_SECONDS = 5.0

# Deployment states the watch writes that mean a cluster is not serving what it was asked to.
UNHEALTHY = {"degraded", "failed"}


class Deployment(BaseModel):
    workload: str
    revision: int
    dgd_name: str | None
    replicas: int
    state: str


class ClusterView(BaseModel):
    name: str
    region: str
    labels: dict[str, str]
    cordoned: bool
    cost_per_gpu_hour: float | None = None  # None: unknown
    cards: list[tuple[str, int]]  # (display name, GPUs)
    gpus_total: int
    gpus_free: int
    inventory_source: str
    inventory_error: str | None
    deployments: list[Deployment]
    health: str  # healthy, degraded, busy (with GPUs used by workloads the viewer cannot see), idle, unknown
    health_words: str

    @property
    def gpus_used(self) -> int:
        return self.gpus_total - self.gpus_free


def cluster_view(record: ClusterRecord, inventory: ClusterInventory | None,
                 workloads: list[dict[str, Any]]) -> ClusterView:
    cards: Counter[str] = Counter()
    free = 0
    for pool in inventory.pools if inventory else []:
        cards[card_name(pool.hardware_id) if pool.hardware_id else pool.product or "unknown card"] += \
            pool.gpus_per_node * pool.nodes
        free += pool.free_gpus * pool.nodes
    deployments = [Deployment(workload=w["id"], revision=d.get("revision") or 0, dgd_name=d.get("dgd_name"),
                              replicas=d.get("replicas") or 0, state=d.get("state") or "")
                   for w in workloads for d in w.get("deployments", []) if d.get("cluster") == record.name]
    error = inventory.error if inventory else "no inventory was read"
    sick = sorted({d.workload for d in deployments if d.state in UNHEALTHY})
    if sick:
        health, words = "degraded", f"the watch found {', '.join(sick)} not serving as asked"
    elif error:
        health, words = "unknown", f"its inventory could not be read: {error}"
    elif deployments:
        health, words = "healthy", "every deployment on it is as the watch expects"
    elif (used := sum(cards.values()) - free) > 0:
        # A viewer sees its own team's workloads only: GPUs in use with none of them on the cluster are
        # another team's (or not the plane's). "Idle" would invite placing work there.
        health, words = "busy", (f"reachable; {used} of {sum(cards.values())} GPUs are used by workloads you "
                                 "cannot see here (another team's, or not run by the plane)")
    else:
        health, words = "idle", "reachable, with no deployments"
    if record.cordoned:
        words += "; cordoned: it takes no new replicas"
    if record.preflight is not None and not record.preflight.passed:
        failed = ", ".join(line.check for line in record.preflight.failed)
        words += f"; its preflight failed ({failed}): it takes no replicas until a check passes"
    return ClusterView(name=record.name, region=record.region, labels=dict(record.labels), cordoned=record.cordoned,
                       cost_per_gpu_hour=record.cost_per_gpu_hour, cards=sorted(cards.items()),
                       gpus_total=sum(cards.values()), gpus_free=free,
                       inventory_source=inventory.source if inventory else "", inventory_error=error,
                       deployments=deployments, health=health, health_words=words)


def gpu_chart(views: list[ClusterView]) -> Markup:
    return stacked_bars("GPUs used and free per cluster",
                        [BarRow(label=v.name, segments=[Segment(label="used", value=v.gpus_used),
                                                        Segment(label="free", value=v.gpus_free)])
                         for v in views if v.gpus_total], "GPUs")


async def _inventories(request: Request, settings, records: list[ClusterRecord]) -> dict[str, ClusterInventory]:
    found = {r.name: r.manual_inventory.to_inventory(r.name) for r in records if r.manual_inventory is not None}
    live = [r for r in records if r.manual_inventory is None]
    reading = asyncio.ensure_future(live_reads_of(request.app.state).inventories(
        temporal_or_none(request.app.state), settings, live))
    try:
        # Shielded: a read that outlasts the page goes on and fills the cache for the next view.
        read = await asyncio.wait_for(asyncio.shield(reading), LIVE_WAIT_SECONDS)
    except TimeoutError:
        read = [ClusterInventory(cluster=r.name, error=f"not read within {LIVE_WAIT_SECONDS:g} s; reload shortly")
                for r in live]
    except ApiError as err:  # too many reads under way: the page still shows the registry
        read = [ClusterInventory(cluster=r.name, error=err.message) for r in live]
    return found | {inv.cluster: inv for inv in read}


async def _views(request: Request, principal, db, settings, records: list[ClusterRecord]) -> list[ClusterView]:
    inventories = await _inventories(request, settings, records)
    workloads = [answer_fields(w) for w in await list_workloads(principal, db=db, limit=1000)]
    return [cluster_view(r, inventories.get(r.name), workloads) for r in records]


@router.get("/clusters")
async def fleet(request: Request, principal: ConsoleViewer, db: DbDep, settings: SettingsDep):
    views = await _views(request, principal, db, settings, await store.list_clusters(db))
    teams = await quotas.fleet(principal, db=db)
    return render(request, "clusters.html", principal=principal, clusters=views, chart=gpu_chart(views),
                  teams=teams, quota_chart=quota_chart(teams))


@router.get("/clusters/{name}")
async def cluster_page(request: Request, name: str, principal: ConsoleViewer, db: DbDep, settings: SettingsDep,
                       check_not_run: str | None = None):
    record = await store.get_cluster(db, name)
    if record is None:
        raise ApiError(404, f"cluster {name!r} is not registered")
    view = (await _views(request, principal, db, settings, [record]))[0]
    return render(request, "cluster.html", principal=principal, cluster=view, chart=gpu_chart([view]),
                  preflight=record.preflight, check_not_run=check_not_run, may_check=principal.has("admin"))


@router.post("/clusters/{name}/check")
async def check_again(request: Request, name: str, principal: ConsoleAdmin, db: DbDep, settings: SettingsDep):
    form = await read_form(request)
    check_csrf(request, form)
    record = await store.get_cluster(db, name)
    if record is None:
        raise ApiError(404, f"cluster {name!r} is not registered")
    checked = await check_and_record(record, db=db, temporal=temporal_or_none(request.app.state), settings=settings,
                                     checks=cluster_checks_of(request.app.state))
    return await cluster_page(request, name, principal, db, settings, check_not_run=checked.check_not_run)

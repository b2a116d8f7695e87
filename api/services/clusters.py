"""The cluster registry: register a cluster (its kubeconfig reference checked, its preflight run), check it
again, read, re-price, cordon and remove one. Clusters belong to the organisation: who may change them is the
routes' and pages' business (admins)."""

from __future__ import annotations

import asyncpg
from temporalio.client import Client

from api.errors import ApiError
from api.services.cluster_checks import ClusterChecked, ClusterChecks, check_and_record, check_kubeconfig
from wingsmith.adapters.store import clusters as store
from wingsmith.adapters.store.clusters import ClusterExists, ClusterInUse, ClusterRecord, ClusterSpec
from wingsmith.domain.config import Settings


async def register(spec: ClusterSpec, *, db: asyncpg.Pool, temporal: Client | None, settings: Settings,
                   checks: ClusterChecks) -> tuple[ClusterChecked, bool]:
    """The cluster registered (or already so, with the same settings: created is False) and checked; other
    settings under a taken name are a conflict (409)."""
    await check_kubeconfig(spec, settings=settings, checks=checks)
    try:
        record, created = await store.create_cluster(db, spec)
    except ClusterExists as exc:
        raise ApiError(409, str(exc), details={"name": spec.name}) from None
    return await check_and_record(record, db=db, temporal=temporal, settings=settings, checks=checks), created


async def check(name: str, *, db: asyncpg.Pool, temporal: Client | None, settings: Settings,
                checks: ClusterChecks) -> ClusterChecked:
    """Run a registered cluster's preflight again; a passing check makes it placeable."""
    return await check_and_record(await cluster(db, name), db=db, temporal=temporal, settings=settings,
                                  checks=checks)


async def cluster(db: asyncpg.Pool, name: str) -> ClusterRecord:
    return found(name, await store.get_cluster(db, name))


async def set_cost(db: asyncpg.Pool, name: str, cost_per_gpu_hour: float | None) -> ClusterRecord:
    return found(name, await store.set_cost(db, name, cost_per_gpu_hour))


async def set_cordoned(db: asyncpg.Pool, name: str, cordoned: bool) -> ClusterRecord:
    return found(name, await store.set_cordoned(db, name, cordoned))


async def remove(db: asyncpg.Pool, name: str) -> None:
    """Refused (409) while deployments live on the cluster."""
    try:
        deleted = await store.delete_cluster(db, name)
    except ClusterInUse as exc:
        raise ApiError(409, str(exc), details={"workloads": exc.workloads}) from None
    if not deleted:
        raise ApiError(404, f"cluster {name!r} is not registered")


def found(name: str, record: ClusterRecord | None) -> ClusterRecord:
    if record is None:
        raise ApiError(404, f"cluster {name!r} is not registered")
    return record

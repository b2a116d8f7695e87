"""The cluster registry: the `clusters` table.

A cluster row says where the cluster is (region, labels), how to reach its Kubernetes API *by
reference* (`file:`, `env:` or `secret:`, see wingsmith/adapters/kube/kubeconfig.py, and a context name,
resolved by the worker when an activity runs: no credential is ever stored here), where its
deployments' frontends are reachable for the gateway, whether it is cordoned, for clusters whose
nodes carry no GPU labels a manual inventory, optionally what one of its GPUs costs per hour, and its
last preflight checklist (wingsmith/domain/member_clusters.py): a cluster whose last check failed is registered
but takes no replicas.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated

import asyncpg
from pydantic import BaseModel, Field, field_validator

from wingsmith.adapters.inventory import ManualInventory
from wingsmith.adapters.kube.kubeconfig import canonical
from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.kube_ref import KubeconfigRef
from wingsmith.domain.member_clusters import Preflight
from wingsmith.domain.placement.models import ClusterInfo
from wingsmith.domain.text import MAX_LIST, LabelText, NameText, StorableText

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Far above any card's price: beyond it the number is a typo, and it keeps cost arithmetic finite.
MAX_COST_PER_GPU_HOUR = 1_000_000.0
CostPerGpuHour = Annotated[float | None, Field(
    ge=0, le=MAX_COST_PER_GPU_HOUR, allow_inf_nan=False,
    description="what one GPU-hour costs on this cluster (the organisation's one currency); plans sized from a "
                "traffic target prefer the cheapest feasible card. Absent: unknown")]
_KUBECONFIG_CONTENT = ("apiVersion", "client-key-data", "client-certificate-data", "token:", "clusters:")


class ClusterSpec(BaseModel):
    name: NameText = Field(description="DNS-1123 label: lower-case letters, digits and '-', at most 63")
    region: LabelText = ""
    labels: dict[NameText, LabelText] = Field(default_factory=dict, max_length=MAX_LIST)
    kubeconfig: StorableText = Field(min_length=1, max_length=4096,
                            description="where the worker finds the kubeconfig, by reference (its contents "
                                        "are never stored): file:<path> inside the kubeconfig directory (a bare "
                                        "absolute path means the same), env:KUBECONFIG_<NAME>, or "
                                        "secret:<namespace>/<name>[#<key>]")
    kube_context: NameText = Field(default="", description="context in that file; empty: current-context")
    frontend_base_url: StorableText = Field(default="", max_length=2048,
                                   description="base URL where this cluster's deployment frontends are reachable")
    cordoned: bool = False
    manual_inventory: ManualInventory | None = Field(
        default=None, description="GPU nodes declared by hand, for clusters whose nodes carry no "
                                  "nvidia.com/gpu.product label; used instead of a live read")
    cost_per_gpu_hour: CostPerGpuHour = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"cluster name {value!r} must be a DNS-1123 label (a-z, 0-9, '-', at most 63)")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(val) or len(val) > 63:
                raise ValueError(f"label {key}={val} is not a valid Kubernetes-style label")
        return value

    @field_validator("kubeconfig")
    @classmethod
    def _reference_only(cls, value: str) -> str:
        # Pasting a kubeconfig's contents here would put credentials in Postgres: refuse without echoing it.
        if "\n" in value or any(marker in value for marker in _KUBECONFIG_CONTENT):
            raise ValueError("kubeconfig must be a reference to a kubeconfig (file:, env: or secret:), "
                             "not its contents")
        # Only the spelling here: whether the reference is allowed is the API's and the loader's to say,
        # so a row stored before these rules still reads back.
        return canonical(value)

    @field_validator("frontend_base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"frontend_base_url {value!r} must be an http(s) URL")
        return value.rstrip("/")

    def info(self) -> ClusterInfo:
        return ClusterInfo(name=self.name, region=self.region, labels=self.labels, cordoned=self.cordoned)

    def kubeconfig_ref(self) -> KubeconfigRef:
        return KubeconfigRef(source=self.kubeconfig, context=self.kube_context or None)

    def declared_cards(self) -> list[str]:
        """The placeable cards its manual inventory declares (a live cluster's are known only once read)."""
        pools = self.manual_inventory.pools if self.manual_inventory else []
        return list(dict.fromkeys(p.hardware for p in pools if get_hardware(p.hardware).placeable))


def fleet_offer(clusters: Iterable[ClusterSpec],
                live_cards: Mapping[str, Iterable[str | None]] | None = None) -> dict[str, float | None]:
    """Each card the registered clusters declare, or, for a cluster without a manual inventory, the cards
    its live inventory shows (`live_cards`, by cluster), with the cheapest known cost per GPU-hour among the
    clusters offering it (None: none of them says). Cordoned clusters take no new replicas, so they
    offer nothing. Pure: what a plan sized from a traffic target compares cards with."""
    offer: dict[str, float | None] = {}
    live = live_cards or {}
    for cluster in clusters:
        if cluster.cordoned or cluster.info().unplaceable:
            continue
        read = [c for c in dict.fromkeys(live.get(cluster.name, ())) if c is not None and get_hardware(c).placeable]
        for card in cluster.declared_cards() if cluster.manual_inventory else read:
            known = [p for p in (offer.get(card), cluster.cost_per_gpu_hour) if p is not None]
            offer[card] = min(known) if known else None
    return offer


class ClusterRecord(ClusterSpec):
    created_at: datetime
    updated_at: datetime
    preflight: Preflight | None = Field(
        default=None, description="its last preflight checklist (registration, `POST /v1/clusters/{name}/check`); "
                                  "a failing line keeps it from taking replicas. None: never checked")

    def info(self) -> ClusterInfo:
        reason = self.preflight.unplaceable_reason() if self.preflight else None
        return ClusterInfo(name=self.name, region=self.region, labels=self.labels, cordoned=self.cordoned,
                           unplaceable=reason)


class ClusterExists(Exception):
    def __init__(self, name: str):
        super().__init__(f"cluster {name!r} is already registered with different settings")
        self.name = name


class ClusterInUse(Exception):
    def __init__(self, name: str, workloads: list[str]):
        super().__init__(f"cluster {name!r} still has deployments of workload(s) {', '.join(workloads)}")
        self.name = name
        self.workloads = workloads


_COLUMNS = ("name, region, labels, kubeconfig_ref, kube_context, frontend_base_url, cordoned, "
            "manual_inventory, cost_per_gpu_hour, created_at, updated_at, preflight")


def _record(row: asyncpg.Record) -> ClusterRecord:
    return ClusterRecord(
        name=row["name"], region=row["region"], labels=row["labels"], kubeconfig=row["kubeconfig_ref"],
        kube_context=row["kube_context"], frontend_base_url=row["frontend_base_url"], cordoned=row["cordoned"],
        manual_inventory=row["manual_inventory"], cost_per_gpu_hour=row["cost_per_gpu_hour"],
        created_at=row["created_at"], updated_at=row["updated_at"], preflight=row["preflight"])


def _same(record: ClusterRecord, spec: ClusterSpec) -> bool:
    return ClusterSpec.model_validate(record.model_dump(include=set(ClusterSpec.model_fields))) == spec


async def create_cluster(pool: asyncpg.Pool, spec: ClusterSpec) -> tuple[ClusterRecord, bool]:
    """Register a cluster; returns (record, created). Registering the same settings again is a no-op
    (a retried request), different settings under the same name raise `ClusterExists`."""
    manual = spec.manual_inventory.model_dump() if spec.manual_inventory else None
    row = await pool.fetchrow(
        f"insert into clusters (name, region, labels, kubeconfig_ref, kube_context, frontend_base_url,"
        f" cordoned, manual_inventory, cost_per_gpu_hour) values ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        f" on conflict (name) do nothing returning {_COLUMNS}",
        spec.name, spec.region, spec.labels, spec.kubeconfig, spec.kube_context, spec.frontend_base_url,
        spec.cordoned, manual, spec.cost_per_gpu_hour)
    if row is not None:
        return _record(row), True
    existing = await get_cluster(pool, spec.name)
    if existing is not None and _same(existing, spec):
        return existing, False
    raise ClusterExists(spec.name)


async def get_cluster(pool: asyncpg.Pool, name: str) -> ClusterRecord | None:
    row = await pool.fetchrow(f"select {_COLUMNS} from clusters where name = $1", name)
    return _record(row) if row else None


async def list_clusters(pool: asyncpg.Pool) -> list[ClusterRecord]:
    return [_record(r) for r in await pool.fetch(f"select {_COLUMNS} from clusters order by name")]


async def set_cordoned(pool: asyncpg.Pool, name: str, cordoned: bool) -> ClusterRecord | None:
    row = await pool.fetchrow(
        f"update clusters set cordoned = $2, updated_at = now() where name = $1 returning {_COLUMNS}",
        name, cordoned)
    return _record(row) if row else None


async def set_cost(pool: asyncpg.Pool, name: str, cost_per_gpu_hour: float | None) -> ClusterRecord | None:
    """Set (or, with None, forget) what a GPU-hour costs on a cluster; None when it is not registered."""
    row = await pool.fetchrow(
        f"update clusters set cost_per_gpu_hour = $2, updated_at = now() where name = $1 returning {_COLUMNS}",
        name, cost_per_gpu_hour)
    return _record(row) if row else None


async def set_preflight(pool: asyncpg.Pool, name: str, preflight: Preflight) -> ClusterRecord | None:
    """Record a cluster's checklist (it decides whether placement may use the cluster); None when the
    cluster is not registered (removed while it was checked)."""
    row = await pool.fetchrow(
        f"update clusters set preflight = $2, updated_at = now() where name = $1 returning {_COLUMNS}",
        name, preflight.model_dump(mode="json"))
    return _record(row) if row else None


async def delete_cluster(pool: asyncpg.Pool, name: str) -> bool:
    """Remove a cluster from the registry; refuses (`ClusterInUse`) while deployments live on it."""
    async with pool.acquire() as conn, conn.transaction():
        workloads = [r["workload_id"] for r in await conn.fetch(
            "select workload_id from deployments where cluster = $1 order by workload_id", name)]
        if workloads:
            raise ClusterInUse(name, workloads)
        return await conn.fetchval("delete from clusters where name = $1 returning true", name) is not None

"""Team quotas in the registry: the `team_quotas` table (an admin's settings) and `quota_holds` (what the API
last let each workload hold), and a team's use read from the workloads, holds, deployments and cluster prices
(wingsmith/domain/quotas.py judges it). Both tables are written by the API only.

A check and the hold it grants happen in one transaction under the team's advisory lock (`locked`): two
requests of one team are judged one after the other, and the second sees what the first was allowed even
before its workflow records anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

import asyncpg
from asyncpg.pool import PoolConnectionProxy
from pydantic import BaseModel

from wingsmith.adapters.store import clusters as cluster_store
from wingsmith.domain.quotas import (
    Allowed,
    Holding,
    Placed,
    PricedCluster,
    Quota,
    Recorded,
    card_price,
    holding_of,
)

# A hold counts this long: time enough for a workflow to record a create, and for a scale to converge.
HOLD_HOURS = 6
# One advisory lock key per team, in a namespace of the plane's own (the migration lock is another key).
_LOCK = "wingsmith-quota:"
Conn = asyncpg.Connection | PoolConnectionProxy


class QuotaRecord(BaseModel):
    team: str
    quota: Quota
    set_by: str
    updated_at: datetime


def _record(row: asyncpg.Record) -> QuotaRecord:
    return QuotaRecord(team=row["team"], set_by=row["set_by"], updated_at=row["updated_at"],
                       quota=Quota(gpus=row["gpus"], budget_per_hour=row["budget_per_hour"], policy=row["policy"]))


async def get_quota(db: asyncpg.Pool | Conn, team: str) -> QuotaRecord | None:
    row = await db.fetchrow("select * from team_quotas where team = $1", team)
    return _record(row) if row else None


async def list_quotas(pool: asyncpg.Pool) -> list[QuotaRecord]:
    return [_record(r) for r in await pool.fetch("select * from team_quotas order by team")]


async def put_quota(pool: asyncpg.Pool, team: str, quota: Quota, set_by: str) -> QuotaRecord:
    row = await pool.fetchrow(
        """insert into team_quotas (team, gpus, budget_per_hour, policy, set_by) values ($1, $2, $3, $4, $5)
           on conflict (team) do update set gpus = excluded.gpus, budget_per_hour = excluded.budget_per_hour,
               policy = excluded.policy, set_by = excluded.set_by, updated_at = now()
           returning *""", team, quota.gpus, quota.budget_per_hour, quota.policy, set_by)
    assert row is not None  # an upsert returns its row
    return _record(row)


async def delete_quota(pool: asyncpg.Pool, team: str) -> bool:
    return await pool.fetchval("delete from team_quotas where team = $1 returning true", team) is not None


async def teams_in_use(pool: asyncpg.Pool) -> list[str]:
    """Every team with a quota or a live workload."""
    rows = await pool.fetch("select team from team_quotas union select team from workloads "
                            "where state not in ('deleted', 'failed') order by 1")
    return [r["team"] for r in rows]


# ---- use -----------------------------------------------------------------------------------------------------

async def priced_clusters(pool: asyncpg.Pool) -> list[PricedCluster]:
    return [PricedCluster(name=r.name, cost_per_gpu_hour=r.cost_per_gpu_hour,
                          cards=r.declared_cards() if r.manual_inventory else None,
                          placeable=not r.cordoned and r.info().unplaceable is None)
            for r in await cluster_store.list_clusters(pool)]


async def holdings(db: asyncpg.Pool | Conn, team: str, clusters: list[PricedCluster]) -> list[Holding]:
    """What each workload of `team` holds (wingsmith.domain.quotas.holding_of), from its registry row, its hold
    (while fresh) and its deployments (the newest revision on each cluster)."""
    recorded = {r["id"]: Recorded(workload_id=r["id"], state=r["state"], card=r["hardware"] or "",
                                  gpus_per_replica=r["gpus_per_replica"] or 0, replicas=r["replicas"] or 0,
                                  updated_at=r["updated_at"])
                for r in await db.fetch(
                    """select id, state, updated_at, spec->>'hardware' as hardware,
                              (spec->>'gpus_per_replica')::int as gpus_per_replica, (spec->>'replicas')::int as replicas
                       from workloads w where team = $1 and (state not in ('deleted', 'failed') or exists (
                           select 1 from quota_holds h where h.workload_id = w.id))""", team)}
    allowed = {r["workload_id"]: Allowed(workload_id=r["workload_id"], card=r["hardware"],
                                         gpus_per_replica=r["gpus_per_replica"], replicas=r["replicas"],
                                         at=r["held_at"])
               for r in await db.fetch(f"select * from quota_holds where team = $1 and held_at > now() - interval "
                                       f"'{HOLD_HOURS} hours'", team)}
    placed: dict[str, list[Placed]] = {}
    for r in await db.fetch(
            """select distinct on (d.workload_id, d.cluster) d.workload_id, d.cluster, d.replicas
               from deployments d join workloads w on w.id = d.workload_id
               where w.team = $1 and w.state not in ('deleted', 'failed')
               order by d.workload_id, d.cluster, d.revision desc""", team):
        placed.setdefault(r["workload_id"], []).append(Placed(cluster=r["cluster"], replicas=r["replicas"]))
    prices = {c.name: c.cost_per_gpu_hour for c in clusters}
    out = []
    for workload_id in sorted(recorded.keys() | allowed.keys()):
        row, hold = recorded.get(workload_id), allowed.get(workload_id)
        card = hold.card if hold is not None else row.card if row is not None else ""
        held = holding_of(workload_id, row, hold, placed.get(workload_id, []), prices, card_price(card, clusters))
        if held is not None:
            out.append(held)
    return out


# ---- the check and its hold, one team at a time -------------------------------------------------------------

@asynccontextmanager
async def locked(pool: asyncpg.Pool, team: str) -> AsyncIterator[Conn]:
    """A connection in a transaction that holds `team`'s advisory lock (released at its end), with the team's
    stale holds removed: read the use, judge, `hold`, all on it."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("select pg_advisory_xact_lock(hashtextextended($1, 0))", _LOCK + team)
        await conn.execute(f"delete from quota_holds where team = $1 and held_at <= now() - interval "
                           f"'{HOLD_HOURS} hours'", team)
        yield conn


async def hold(conn: Conn, *, workload_id: str, team: str, card: str, gpus_per_replica: int,
               replicas: int) -> Allowed | None:
    """Let `workload_id` hold `replicas` × `gpus_per_replica` GPUs of `card` from now on; returns the hold it
    replaces (for `restore` when the request then fails), None when there was none."""
    before = await conn.fetchrow("select * from quota_holds where workload_id = $1", workload_id)
    await conn.execute(
        """insert into quota_holds (workload_id, team, hardware, gpus_per_replica, replicas) values ($1, $2, $3, $4, $5)
           on conflict (workload_id) do update set team = excluded.team, hardware = excluded.hardware,
               gpus_per_replica = excluded.gpus_per_replica, replicas = excluded.replicas, held_at = now()""",
        workload_id, team, card, gpus_per_replica, replicas)
    return Allowed(workload_id=workload_id, card=before["hardware"], gpus_per_replica=before["gpus_per_replica"],
                   replicas=before["replicas"], at=before["held_at"]) if before else None


async def restore(pool: asyncpg.Pool, *, workload_id: str, team: str, before: Allowed | None) -> None:
    """Put back the hold a request replaced, when the request did not take effect (its workflow refused it)."""
    if before is None:
        await pool.execute("delete from quota_holds where workload_id = $1", workload_id)
        return
    await pool.execute(
        """update quota_holds set team = $2, hardware = $3, gpus_per_replica = $4, replicas = $5, held_at = $6
           where workload_id = $1""",
        workload_id, team, before.card, before.gpus_per_replica, before.replicas, before.at)


class Shape(BaseModel):
    """What a workload holds its GPUs as: its team, card, GPUs per replica and replicas (and the shape an upgrade
    may change), from its registry row, or before its workflow recorded one, from its hold."""
    team: str
    card: str
    gpus_per_replica: int
    replicas: int
    layout: str | None = None
    variant: str | None = None
    features: list[str] | None = None
    sized: bool = False


async def shape_of(db: asyncpg.Pool, workload_id: str) -> Shape | None:
    row = await db.fetchrow("select team, spec from workloads where id = $1", workload_id)
    if row is not None:
        spec = row["spec"] or {}
        return Shape(team=row["team"], card=spec.get("hardware") or "", gpus_per_replica=spec.get("gpus_per_replica")
                     or 0, replicas=spec.get("replicas") or 0, layout=spec.get("layout"), variant=spec.get("variant"),
                     features=spec.get("features"), sized=spec.get("sized_by") is not None)
    held = await db.fetchrow("select * from quota_holds where workload_id = $1", workload_id)
    if held is None:
        return None
    return Shape(team=held["team"], card=held["hardware"], gpus_per_replica=held["gpus_per_replica"],
                 replicas=held["replicas"])

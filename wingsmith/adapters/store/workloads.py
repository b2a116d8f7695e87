"""Registry rows for workloads, their placements and per-cluster deployments. Keyed writes only, so
a retried activity writes the same row."""

from __future__ import annotations

from typing import Any

import asyncpg

from wingsmith.adapters.store import events
from wingsmith.adapters.store.follow import follow_of
from wingsmith.domain.teams import DEFAULT_TEAM


async def upsert_workload(pool: asyncpg.Pool, *, workload_id: str, artifact_id: str, spec: dict, state: str,
                          workflow_id: str, requested_by: str, step: str, detail: dict | None = None,
                          team: str = DEFAULT_TEAM) -> None:
    # The team is the creator's, fixed at the first write: later writes never move a workload to another team.
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """insert into workloads (id, artifact_id, spec, state, workflow_id, requested_by, team)
               values ($1, $2, $3, $4, $5, $6, $7)
               on conflict (id) do update set state = excluded.state, spec = excluded.spec,
                   artifact_id = excluded.artifact_id, updated_at = now()""",
            workload_id, artifact_id, spec, state, workflow_id, requested_by, team)
        await events.record_event(conn, subject_kind="workload",
                                  source=workflow_id, step=step, subject=workload_id, kind=f"workload_{state}",
                                  actor=requested_by, detail=detail, team=team)


async def save_placement(pool: asyncpg.Pool, *, workload_id: str, revision: int, decision: dict,
                         workflow_id: str) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("insert into placements (workload_id, revision, decision) values ($1, $2, $3) "
                           "on conflict (workload_id, revision) do nothing", workload_id, revision, decision)
        await events.record_event(conn, subject_kind="workload",
                                  source=workflow_id, step=f"placement:{revision}", subject=workload_id,
                                  kind="placement", detail={"replicas": decision.get("replicas"),
                                                            "summary": decision.get("summary")})


async def record_deployment(pool: asyncpg.Pool, *, workload_id: str, cluster: str, dgd_name: str, namespace: str,
                            replicas: int, state: str, frontend_url: str | None, detail: dict, source: str,
                            step: str, revision: int = 0) -> None:
    """One row per version on a cluster (an upgrade runs two side by side), keyed by its revision."""
    async with pool.acquire() as conn, conn.transaction():
        if state == "deleted":
            await conn.execute("delete from deployments where workload_id = $1 and cluster = $2 and revision = $3",
                               workload_id, cluster, revision)
        else:
            await conn.execute(
                """insert into deployments
                     (workload_id, cluster, revision, dgd_name, namespace, replicas, state, frontend_url, detail)
                   values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                   on conflict (workload_id, cluster, revision) do update set dgd_name = excluded.dgd_name,
                       namespace = excluded.namespace, replicas = excluded.replicas, state = excluded.state,
                       frontend_url = coalesce(excluded.frontend_url, deployments.frontend_url),
                       detail = excluded.detail, updated_at = now()""",
                workload_id, cluster, revision, dgd_name, namespace, replicas, state, frontend_url, detail)
        extra = {"revision": revision} if revision else {}
        await events.record_event(conn, subject_kind="workload",
                                  source=source, step=step, subject=workload_id, kind=f"deployment_{state}",
                                  detail={"cluster": cluster, "replicas": replicas, **extra, **detail})


async def set_traffic_split(pool: asyncpg.Pool, *, workload_id: str, cluster: str, revision: int,
                            percent: int | None) -> None:
    """`percent` of the workload's traffic on `cluster` to `revision` (the rest to its other one);
    None: no split, weights follow replicas again. Idempotent."""
    if percent is None:
        await pool.execute("delete from traffic_splits where workload_id = $1 and cluster = $2", workload_id, cluster)
        return
    await pool.execute(
        """insert into traffic_splits (workload_id, cluster, revision, percent) values ($1, $2, $3, $4)
           on conflict (workload_id, cluster) do update set revision = excluded.revision,
               percent = excluded.percent, updated_at = now()""", workload_id, cluster, revision, percent)


async def record_upgrade_event(pool: asyncpg.Pool, *, workload_id: str, source: str, step: str, kind: str,
                               actor: str, detail: dict) -> None:
    async with pool.acquire() as conn:
        await events.record_event(conn, subject_kind="workload",
                                  source=source, step=step, subject=workload_id, kind=kind, actor=actor,
                                  detail=detail)


async def record_heal(pool: asyncpg.Pool, *, workload_id: str, workflow_id: str, step: str, cluster: str,
                      action: str, problem: str, cause: str, seconds: float, outcome: str,
                      times: dict[str, Any] | None = None) -> None:
    """A heal in the audit trail: what the watch saw, what it did, how long until serving again.
    `times`: when the fault happened (as the cluster says), when the plane saw it, when it served again."""
    async with pool.acquire() as conn:
        await events.record_event(conn, subject_kind="workload",
                                  source=workflow_id, step=step, subject=workload_id, kind="workload_healed",
                                  detail={"cluster": cluster, "action": action, "problem": problem, "cause": cause,
                                          "seconds": seconds, "summary": outcome, **(times or {})})


async def list_workloads(pool: asyncpg.Pool, *, limit: int = 200, team: str | None = None) -> list[dict[str, Any]]:
    """The newest workloads, of one team (`team`) or of all (None)."""
    rows = await pool.fetch("select id, artifact_id, state, workflow_id, requested_by, team, spec, created_at, "
                            "updated_at from workloads where ($2::text is null or team = $2) "
                            "order by created_at desc limit $1", limit, team)
    out = []
    for r in rows:
        item = dict(r)
        item["deployments"] = [dict(d) for d in await pool.fetch(
            "select cluster, revision, dgd_name, replicas, state, frontend_url from deployments "
            "where workload_id = $1 order by cluster, revision", r["id"])]
        out.append(item)
    return out


async def workload_teams(pool: asyncpg.Pool, workload_ids: list[str]) -> dict[str, str]:
    """The team of each of these workloads that the registry holds."""
    rows = await pool.fetch("select id, team from workloads where id = any($1::text[])", workload_ids)
    return {r["id"]: r["team"] for r in rows}


async def get_workload(pool: asyncpg.Pool, workload_id: str) -> dict[str, Any] | None:
    row = await pool.fetchrow("select * from workloads where id = $1", workload_id)
    if row is None:
        return None
    out = dict(row)
    out["deployments"] = [dict(d) for d in await pool.fetch(
        "select * from deployments where workload_id = $1 order by cluster, revision", workload_id)]
    placement = await pool.fetchrow("select revision, decision from placements where workload_id = $1 "
                                    "order by revision desc limit 1", workload_id)
    out["placement"] = dict(placement) if placement else None
    out["events"] = await events.events_of(pool, "workload", workload_id)
    out["follow"] = await follow_of(pool, workload_id)
    return out


async def approved_artifact(pool: asyncpg.Pool, artifact_id: str) -> asyncpg.Record | None:
    """The artifact a workload names, in any spelling of its repo id (Hub ids are case-insensitive);
    the row carries the canonical id the plan then uses."""
    return await pool.fetchrow(
        """select a.id, a.repo_id, a.sha, a.state, a.superseded_by, a.proposal, d.version as draft_version, d.evidence,
                  d.sizing, d.catalog_version
           from artifacts a left join lateral (select version, evidence, sizing, catalog_version from drafts
                                               where artifact_id = a.id order by version desc limit 1) d on true
           where lower(a.id) = lower($1) order by a.id = $1 desc, a.created_at limit 1""", artifact_id)


async def failure_causes(pool: asyncpg.Pool, workload_ids: list[str]) -> dict[str, str]:
    """The cause each failed workload recorded last (its `failed` event), for lists that show many at once."""
    # record_workload_state names the event workload_<state>.
    rows = await pool.fetch("select distinct on (subject) subject, detail->>'cause' as cause from events "
                            "where subject_kind = 'workload' and kind = 'workload_failed' "
                            "and subject = any($1::text[]) "
                            "order by subject, id desc", workload_ids)
    return {r["subject"]: r["cause"] for r in rows if r["cause"]}

"""Registry rows for endpoints, and the serving deployments an endpoint may route to. Keyed writes
only, so a retried activity writes the same row."""

from __future__ import annotations

from typing import Any

import asyncpg

from wingsmith.adapters.store import events
from wingsmith.domain.endpoints import ServingDeployment, WorkloadFacts
from wingsmith.domain.teams import DEFAULT_TEAM


async def serving_deployments(pool: asyncpg.Pool, workload_ids: list[str]) -> list[ServingDeployment]:
    """Deployments of these workloads recorded as serving with a frontend, by workload, cluster and
    revision; under an upgrade's traffic split each carries its percent."""
    rows = await pool.fetch(
        """select d.workload_id, d.cluster, d.revision, d.replicas, d.frontend_url,
                  w.spec->>'served_model_name' as served,
                  case when s.revision is null then null when s.revision = d.revision then s.percent
                       else 100 - s.percent end as split
           from deployments d join workloads w on w.id = d.workload_id
                left join traffic_splits s on s.workload_id = d.workload_id and s.cluster = d.cluster
           where d.workload_id = any($1::text[]) and d.state = 'serving' and d.frontend_url is not null
           order by d.workload_id, d.cluster, d.revision""", workload_ids)
    return [ServingDeployment(workload_id=r["workload_id"], cluster=r["cluster"], replicas=r["replicas"],
                              frontend_url=r["frontend_url"], served_model_name=r["served"], revision=r["revision"],
                              split_percent=r["split"]) for r in rows]


async def upsert_endpoint(pool: asyncpg.Pool, *, name: str, workloads: list[str], state: str, workflow_id: str,
                          routes: list[dict[str, Any]], step: str, event: str | None = None,
                          actor: str = "system", team: str = DEFAULT_TEAM, requested_by: str = "unknown") -> None:
    # Team and creator are fixed at the first write (a later write never moves an endpoint to another team).
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """insert into endpoints (name, workloads, state, workflow_id, routes, team, requested_by)
               values ($1, $2, $3, $4, $5, $6, $7)
               on conflict (name) do update set workloads = excluded.workloads, state = excluded.state,
                   routes = excluded.routes, updated_at = now()""",
            name, workloads, state, workflow_id, routes, team, requested_by)
        await events.record_event(conn, subject_kind="endpoint",
                                  source=workflow_id, step=step, subject=name, kind=event or f"endpoint_{state}",
                                  actor=actor, detail={"backends": [b["id"] for b in routes], "workloads": workloads},
                                  team=team)


async def list_endpoints(pool: asyncpg.Pool, *, team: str | None = None) -> list[dict[str, Any]]:
    """The endpoints of one team (`team`) or of all (None)."""
    rows = await pool.fetch("select name, workloads, state, routes, team, requested_by, updated_at from endpoints "
                            "where ($1::text is null or team = $1) order by name", team)
    return [dict(r) for r in rows]


async def get_endpoint(pool: asyncpg.Pool, name: str) -> dict[str, Any] | None:
    row = await pool.fetchrow("select * from endpoints where name = $1", name)
    return dict(row) if row is not None else None


async def workload_facts(pool: asyncpg.Pool, workload_ids: list[str],
                         team: str | None = None) -> dict[str, WorkloadFacts]:
    """What the registry says about each of these workloads that exists (an endpoint may only name those);
    with `team`, only that team's (an endpoint takes only its own team's workloads: others' do not exist)."""
    rows = await pool.fetch(
        """select w.id, w.state, w.spec->>'served_model_name' as served, a.repo_id
           from workloads w join artifacts a on a.id = w.artifact_id
           where w.id = any($1::text[]) and ($2::text is null or w.team = $2)""", workload_ids, team)
    return {r["id"]: WorkloadFacts(workload_id=r["id"], state=r["state"], served_model_name=r["served"],
                                   repo_id=r["repo_id"]) for r in rows}

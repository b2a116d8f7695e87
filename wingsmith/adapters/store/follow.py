"""Registry rows for the follow policy: which workloads move by themselves when a newer draft of their
repository is approved. The policy in force is the one set later (`follow_policies`), else the one
the workload was created with (its plan's `follow`), else manual."""

from __future__ import annotations

from typing import Any

import asyncpg

from wingsmith.adapters.store import events

FOLLOW_SQL = "coalesce(f.follow, w.spec->>'follow', 'manual')"
# A workload on its way out, or that never served, is not moved to a newer version.
NOT_FOLLOWING_STATES = ("deleting", "deleted", "failed")


async def follow_of(pool: asyncpg.Pool, workload_id: str) -> str | None:
    return await pool.fetchval(f"select {FOLLOW_SQL} from workloads w left join follow_policies f "
                               "on f.workload_id = w.id where w.id = $1", workload_id)


async def set_follow(pool: asyncpg.Pool, *, workload_id: str, follow: str, actor: str, step: str,
                     team: str | None = None) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """insert into follow_policies (workload_id, follow, set_by) values ($1, $2, $3)
               on conflict (workload_id) do update set follow = excluded.follow, set_by = excluded.set_by,
                   set_at = now()""", workload_id, follow, actor)
        await events.record_event(conn, subject_kind="workload",
                                  source="api", step=step, subject=workload_id, kind="follow_set", actor=actor,
                                  detail={"follow": follow}, team=team)


async def followers(pool: asyncpg.Pool, newer: str) -> list[dict[str, Any]]:
    """The live workloads that the newly approved artifact `newer` supersedes: those on another
    artifact of the same repository (any spelling) and the same branch. A pinned commit follows no
    branch, so approving one moves nothing."""
    rows = await pool.fetch(
        f"""select w.id, w.artifact_id, w.state, {FOLLOW_SQL} as follow
            from artifacts n join artifacts a on lower(a.repo_id) = lower(n.repo_id) and a.revision = n.revision
                 join workloads w on w.artifact_id = a.id
                 left join follow_policies f on f.workload_id = w.id
            where n.id = $1 and a.id <> n.id and n.revision !~ '^[0-9a-f]{{40}}$'
              and not (w.state = any($2::text[]))
            order by w.created_at, w.id""", newer, list(NOT_FOLLOWING_STATES))
    return [dict(r) for r in rows]


async def record_follow_event(pool: asyncpg.Pool, *, source: str, step: str, workload_id: str, kind: str,
                              actor: str, detail: dict) -> None:
    async with pool.acquire() as conn:
        await events.record_event(conn, subject_kind="workload",
                                  source=source, step=step, subject=workload_id, kind=kind, actor=actor, detail=detail)

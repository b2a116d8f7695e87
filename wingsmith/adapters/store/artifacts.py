"""Registry rows for artifacts, drafts, reviews and their audit events. Every write is keyed so a
retried activity writes the same row (upserts, `on conflict do nothing` for events)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from wingsmith.adapters.store import events
from wingsmith.domain.review import RecordedDecision


async def record_event(conn, *, source: str, step: str, subject: str, kind: str, actor: str = "system",
                       detail: dict | None = None, team: str | None = None) -> None:
    """An event of the artifact `subject` (other kinds write through wingsmith/adapters/store/events.py)."""
    await events.record_event(conn, subject_kind="artifact", source=source, step=step, subject=subject, kind=kind,
                              actor=actor, detail=detail, team=team)


async def save_draft(pool: asyncpg.Pool, *, workflow_id: str, artifact_id: str, repo_id: str, revision: str,
                     sha: str, requested_by: str, proposal: dict, version: int, catalog_version: str,
                     evidence: dict, sizing: dict, warnings: list[str]) -> list[str]:
    """Save the artifact and its draft; mark older artifacts of the same repo superseded.
    Returns the workflow ids of superseded artifacts that were still waiting for a review."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by, proposal)
               values ($1, $2, $3, $4, 'draft', $5, $6, $7)
               on conflict (id) do update set proposal = excluded.proposal, updated_at = now()
               where artifacts.state in ('resolving', 'draft')""",
            artifact_id, repo_id, revision, sha, workflow_id, requested_by, proposal)
        # The diff base is fixed here, with the draft: a retried save keeps the first row, so the base
        # is the newest approved artifact of the repo when the draft was first saved.
        await conn.execute(
            """insert into drafts (artifact_id, version, catalog_version, evidence, sizing, warnings, diff_base)
               values ($1, $2, $3, $4, $5, $6, (
                   select a.id from artifacts a join reviews r on r.artifact_id = a.id
                   where lower(a.repo_id) = lower($7) and r.decision = 'approve' and a.id <> $1
                   order by r.decided_at desc, a.created_at desc limit 1))
               on conflict (artifact_id, version) do nothing""",
            artifact_id, version, catalog_version, evidence, sizing, warnings, repo_id)
        # Only a newer draft of the *same revision name* (another commit, or the same commit with
        # newer recipe evidence) supersedes, and only drafts: pinning an old sha on purpose must not
        # retire the branch head, and a decision (approved, rejected, expired) stands whatever is
        # registered after it.
        rows = await conn.fetch(
            """update artifacts set superseded_by = $1, updated_at = now(), state = 'superseded'
               where lower(repo_id) = lower($2) and revision = $3 and id <> $1
                 and superseded_by is null and state in ('resolving', 'draft') and $3 !~ '^[0-9a-f]{40}$'
               returning workflow_id, state""", artifact_id, repo_id, revision)
        await record_event(conn, source=workflow_id, step=f"draft-saved:{version}", subject=artifact_id,
                           kind="draft_saved", actor=requested_by,
                           detail={"version": version, "warnings": len(warnings), "catalog_version": catalog_version})
    return [r["workflow_id"] for r in rows if r["state"] == "superseded"]


async def record_decision(pool: asyncpg.Pool, *, workflow_id: str, artifact_id: str,
                          decision: RecordedDecision) -> None:
    state = {"approve": "approved", "reject": "rejected", "expire": "expired"}[decision.decision]
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """insert into reviews
                 (artifact_id, draft_version, decision, reviewer, via, comment, selections, decided_at)
               values ($1, $2, $3, $4, $5, $6, $7, $8) on conflict (artifact_id) do nothing""",
            artifact_id, decision.draft_version, decision.decision, decision.reviewer, decision.via,
            decision.comment, decision.selections.model_dump(), decision.decided_at)
        await conn.execute("update artifacts set state = $2, updated_at = now() where id = $1 "
                           "and state in ('draft', 'resolving')", artifact_id, state)
        await record_event(conn, source=workflow_id, step="decision", subject=artifact_id, kind=f"draft_{state}",
                           actor=decision.reviewer, detail={"via": decision.via, "comment": decision.comment,
                                                            "draft_version": decision.draft_version})


async def set_state(pool: asyncpg.Pool, *, workflow_id: str, artifact_id: str, state: str, step: str,
                    detail: dict | None = None, repo_id: str = "", revision: str = "", sha: str = "",
                    requested_by: str = "system") -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by)
               values ($1, $2, $3, $4, $5, $6, $7)
               on conflict (id) do update set state = excluded.state, updated_at = now()
               where artifacts.state in ('resolving', 'draft')""",
            artifact_id, repo_id, revision, sha, state, workflow_id, requested_by)
        await record_event(conn, source=workflow_id, step=step, subject=artifact_id, kind=f"artifact_{state}",
                           detail=detail)


DECIDED_STATES = ("approved", "rejected", "expired")


async def decided_artifact(pool: asyncpg.Pool, repo_id: str, sha: str) -> dict[str, Any] | None:
    """The decided artifact of this (repo, commit), in any spelling of the repo id, if there is one."""
    row = await pool.fetchrow(
        """select id, workflow_id, sha, revision, state from artifacts
           where lower(repo_id) = lower($1) and sha = $2 and state = any($3::text[])
           order by created_at limit 1""", repo_id, sha, list(DECIDED_STATES))
    return dict(row) if row else None


async def list_artifacts(pool: asyncpg.Pool, *, state: str | None = None, model: str | None = None,
                         limit: int = 100) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        """select a.id, a.repo_id, a.revision, a.sha, a.state, a.workflow_id, a.requested_by, a.superseded_by,
                  a.created_at, a.updated_at,
                  (select max(version) from drafts d where d.artifact_id = a.id) as draft_version
           from artifacts a
           where ($1::text is null or a.state = $1) and ($2::text is null or lower(a.repo_id) = lower($2))
           order by a.created_at desc limit $3""", state, model, limit)
    return [dict(r) for r in rows]


async def get_artifact(pool: asyncpg.Pool, artifact_id: str) -> dict[str, Any] | None:
    row = await pool.fetchrow("select * from artifacts where id = $1", artifact_id)
    if row is None:
        return None
    out = dict(row)
    draft = await pool.fetchrow("select * from drafts where artifact_id = $1 order by version desc limit 1",
                                artifact_id)
    out["draft"] = dict(draft) if draft else None
    review = await pool.fetchrow("select * from reviews where artifact_id = $1", artifact_id)
    out["review"] = dict(review) if review else None
    out["events"] = await events.events_of(pool, "artifact", artifact_id)
    return out


def dumps(value) -> str:
    return json.dumps(value, default=str)


async def latest_approved(pool: asyncpg.Pool, repo_id: str, *, other_than: str | None = None) -> dict[str, Any] | None:
    """The newest approved artifact of this repository (any spelling), with its draft: what a watch
    compares the branch with (a new draft records the same one as its `diff_base` when saved)."""
    row = await pool.fetchrow(
        """select a.id from artifacts a left join reviews r on r.artifact_id = a.id
           where lower(a.repo_id) = lower($1) and a.state = 'approved' and a.id <> coalesce($2, '')
           order by r.decided_at desc nulls last, a.created_at desc limit 1""", repo_id, other_than)
    return await get_artifact(pool, row["id"]) if row else None


async def artifact_state(pool: asyncpg.Pool, artifact_id: str) -> str | None:
    return await pool.fetchval("select state from artifacts where id = $1", artifact_id)


async def save_performance(pool: asyncpg.Pool, *, artifact_id: str, version: int, status: str, reason: str | None,
                           entries: list[dict[str, Any]]) -> None:
    """Write a draft's performance (kept in its `sizing` document under `performance`): the status and
    reason replace the old ones, each row replaces the one of the same card × layout × mode, so a retried
    write leaves the same document."""
    async with pool.acquire() as conn, conn.transaction():
        sizing = await conn.fetchval("select sizing from drafts where artifact_id = $1 and version = $2 for update",
                                     artifact_id, version)
        if sizing is None:
            return
        old = (sizing.get("performance") or {}).get("entries", [])

        def key(row: dict[str, Any]) -> tuple:
            return row["card"], row["layout"], row["mode"]
        fresh = {key(row) for row in entries}
        merged = [row for row in old if key(row) not in fresh] + entries
        sizing["performance"] = {"status": status, "reason": reason, "entries": merged}
        await conn.execute("update drafts set sizing = $3 where artifact_id = $1 and version = $2",
                           artifact_id, version, sizing)

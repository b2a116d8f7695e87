"""The audit trail: one row per thing that happened to an artifact, a workload or an endpoint.

An event belongs to its subject's kind as well as to its name. Names are unique within a kind only
(a workload and another team's endpoint may both be `kimi-k3`), so every write names the kind and
every read asks for it: a subject's page never shows another kind's events. The `team` column is the
acting principal's team (who did it), not the subject's: the subject's own row says whose it is.

Writes are keyed by (source, step), so a retried activity writes the same row once."""

from __future__ import annotations

from typing import Any, Literal

import asyncpg

SubjectKind = Literal["artifact", "workload", "endpoint"]


async def record_event(conn: Any, *, subject_kind: SubjectKind, source: str, step: str, subject: str, kind: str,
                       actor: str = "system", detail: dict | None = None, team: str | None = None) -> None:
    await conn.execute(
        "insert into events (source, step, subject_kind, subject, kind, actor, detail, team) "
        "values ($1, $2, $3, $4, $5, $6, $7, $8) on conflict (source, step) do nothing",
        source, step, subject_kind, subject, kind, actor, detail or {}, team)


async def events_of(pool: asyncpg.Pool, subject_kind: SubjectKind, subject: str) -> list[dict[str, Any]]:
    """The events of one subject, oldest first."""
    return [dict(r) for r in await pool.fetch(
        "select step, kind, actor, detail, at from events where subject_kind = $1 and subject = $2 order by id",
        subject_kind, subject)]

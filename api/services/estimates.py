"""A draft's expected performance (AIConfigurator's estimates, docs/planning-by-load.md): how a draft shows
them, whether they were ever asked for, and asking for them for a draft that predates them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.errors import ApiError
from api.responses import EstimatesAsked
from contracts import draft_performance as perf_contract
from contracts.draft_performance import DraftPerformanceInput, performance_workflow_id
from wingsmith.adapters.store import artifacts as store
from wingsmith.adapters.temporal import workflow_ui_url
from wingsmith.domain.config import Settings, perf_task_queue
from wingsmith.domain.draft_performance import NOT_ASKED, PENDING, DraftPerformance, stored_draft_requests

# The artifact workflow starts a draft's estimates right after saving it: a draft older than this without a
# performance workflow never had one (it predates estimates).
ASKED_WITHIN = timedelta(minutes=5)


def with_performance(draft: dict[str, Any], *, asked: bool | None = None) -> dict[str, Any]:
    """The draft with its performance lifted out of the sizing document it is stored in (the draft's
    performance workflow writes it there after the draft): pending until the first answer, unless nobody
    ever asked for estimates (`asked` False: a draft that predates them), which is said instead."""
    sizing = dict(draft.get("sizing") or {})
    stored = sizing.pop("performance", None)
    if stored:
        performance = DraftPerformance.model_validate(stored)
    elif asked is False:
        performance = DraftPerformance(status="not_asked", reason=NOT_ASKED)
    else:
        performance = DraftPerformance(status="pending")
    reason = performance.reason or (PENDING if performance.status == "pending" else None)
    return {**draft, "sizing": sizing, "performance": [row.model_dump(mode="json") for row in performance.entries],
            "performance_status": performance.status, "performance_reason": reason}


async def estimates_asked(temporal: Client | None, artifact_workflow_id: str, draft: dict[str, Any]) -> bool | None:
    """Whether a performance workflow was ever started for a draft without figures: None when that cannot
    be told (a draft with figures needs no asking; Temporal unreachable; a draft younger than
    ASKED_WITHIN, whose artifact workflow may not have started its estimates yet). Read only."""
    saved = draft.get("created_at")
    if (draft.get("sizing") or {}).get("performance") or temporal is None or not isinstance(saved, datetime):
        return None
    if datetime.now(UTC) - saved < ASKED_WITHIN:
        return None
    try:
        await temporal.get_workflow_handle(performance_workflow_id(artifact_workflow_id, draft["version"])).describe()
        return True
    except RPCError as err:
        return False if err.status == RPCStatusCode.NOT_FOUND else None


async def ask_for_estimates(artifact: str, version: int, *, db: asyncpg.Pool, temporal: Client,
                            settings: Settings) -> EstimatesAsked:
    """Starts the draft's performance workflow under its one id, so asking twice (or asking for a draft
    whose artifact workflow already asked) starts nothing new; the figures follow on the draft."""
    row = await store.get_artifact(db, artifact)
    draft = (row or {}).get("draft")
    if row is None or draft is None:
        raise ApiError(404, f"artifact {artifact} has no draft")
    if draft["version"] != version:
        raise ApiError(409, f"draft {version} is not the current draft of {artifact} (it is draft "
                       f"{draft['version']}): only the current draft is estimated", code="not_current_draft")
    try:
        requests = stored_draft_requests(row.get("proposal") or {}, draft.get("evidence") or {},
                                         draft.get("sizing") or {})
    except ValueError as err:
        raise ApiError(409, str(err), code="cannot_estimate") from None
    workflow_id = performance_workflow_id(row["workflow_id"], version)
    try:
        await temporal.start_workflow(
            perf_contract.WORKFLOW, DraftPerformanceInput(artifact_id=artifact, version=version, requests=requests,
                                                          perf_task_queue=perf_task_queue(settings.task_queue)),
            id=workflow_id, task_queue=settings.task_queue, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=f"Expected performance of {artifact}, draft {version} (asked for after the draft)")
        started = True
    except WorkflowAlreadyStartedError:
        started = False
    except RPCError as err:
        raise ApiError(503, f"Temporal could not start the estimates: {err.message}") from None
    return EstimatesAsked(workflow_id=workflow_id, workflow_url=workflow_ui_url(settings, workflow_id), started=started)

"""A workload's autoscaling policy: set (at creation, or by PATCH), removed (PATCH with `"autoscaling": null`),
shown with the autoscaler's last decisions, and a decision past the budget approved or rejected. Setting a
policy starts the workload's `AutoscalerWorkflow` (`autoscaler/<workload id>`, USE_EXISTING: one loop per
workload, which reads the policy every period); removing it ends the loop at its next period. No existing
workflow changes: the loop scales through the workload's own `scale` update."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from api.auth import Principal
from api.errors import ApiError, temporal_unavailable
from api.ownership import hide
from api.responses import AutoscaleDecisionRow, Autoscaling
from contracts import autoscaler as contract
from contracts.autoscaler import AutoscalerStatus, DecisionApproval
from contracts.ids import autoscaler_workflow_id
from wingsmith.adapters.starter import autoscaler_handle, start_autoscaler
from wingsmith.adapters.store import autoscaling as store
from wingsmith.adapters.store import events
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.adapters.temporal import workflow_ui_url
from wingsmith.domain.autoscaling import AutoscalingPolicy
from wingsmith.domain.config import Settings
from wingsmith.domain.workloads import WorkloadPlan

NOT_LIVE = ("deleting", "deleted", "failed")


def checked(policy: AutoscalingPolicy, plan: WorkloadPlan | dict | None) -> AutoscalingPolicy:
    """The policy with the plan's targets filled in (a workload sized by a traffic target), or 422 when it has no
    target at all to hold the workload to."""
    sized = (plan.sized_by.model_dump(mode="json") if isinstance(plan, WorkloadPlan) and plan.sized_by
             else (plan or {}).get("sized_by") if isinstance(plan, dict) else None)
    if sized:
        target = sized.get("target") or {}
        policy = policy.with_plan_targets(target.get("ttft_ms"), target.get("tpot_ms"))
    if not policy.has_target:
        raise ApiError(422, "an autoscaling policy needs a target: ttft_p95_ms, tpot_p95_ms or "
                            "requests_per_second_per_replica (a workload sized by a traffic target has them from "
                            "its plan)", code="invalid_autoscaling", details={"field": "autoscaling"})
    return policy


async def set_policy(workload_id: str, policy: AutoscalingPolicy, *, principal: Principal, db: asyncpg.Pool,
                     temporal: Client | None, settings: Settings, plan: WorkloadPlan | None = None,
                     team: str | None = None) -> AutoscalingPolicy:
    """Store the policy and start the loop (`plan`, `team`: a workload being created, whose row is not written
    yet)."""
    if plan is None:
        row = await _own(workload_id, principal, db)
        if row["state"] in NOT_LIVE:
            raise ApiError(409, f"workload {workload_id} is {row['state']}: it scales no more",
                           code="workload_not_live")
        policy, team = checked(policy, row["spec"]), row["team"]
    else:
        policy = checked(policy, plan)
    if temporal is None:
        raise temporal_unavailable()
    await store.set_policy(db, workload_id, policy, principal.name)
    await _event(db, workload_id, "autoscaling_set", principal, policy.model_dump(mode="json"))
    await start_autoscaler(temporal, settings, workload_id=workload_id, team=team or principal.team)
    return policy


async def remove_policy(workload_id: str, *, principal: Principal, db: asyncpg.Pool) -> None:
    """Remove it: the loop ends at its next period, and the replicas stay where they are."""
    await _own(workload_id, principal, db)
    if await store.remove_policy(db, workload_id):
        await _event(db, workload_id, "autoscaling_removed", principal, {})


async def show(workload_id: str, *, viewer: Principal, db: asyncpg.Pool, temporal: Client | None,
               settings: Settings, limit: int = 50) -> Autoscaling:
    await _own(workload_id, viewer, db)
    found = await store.policy_of(db, workload_id)
    decisions = await store.decisions_of(db, workload_id, limit=limit)
    waiting = None
    # A workload that never had a policy has no loop to ask (a page that shows every workload asks for it).
    if temporal is not None and (found or decisions):
        try:
            status = await autoscaler_handle(temporal, workload_id).query(contract.QUERY_STATUS,
                                                                          result_type=AutoscalerStatus)
            waiting = status.waiting.model_dump(mode="json") if status.waiting else None
        except (RPCError, Exception):  # noqa: BLE001 - the recorded decisions still answer
            waiting = None
    wf_id = autoscaler_workflow_id(workload_id)
    return Autoscaling(workload_id=workload_id, policy=found[0] if found else None,
                       set_by=found[1] if found else None, workflow_id=wf_id,
                       workflow_url=workflow_ui_url(settings, wf_id), waiting=waiting,
                       decisions=[AutoscaleDecisionRow.model_validate(r) for r in decisions])


async def changes(workload_id: str, *, viewer: Principal, db: asyncpg.Pool, since: datetime,
                  limit: int = 200) -> list[AutoscaleDecisionRow]:
    """The autoscaler's scales (done, held or waiting; no holds) since `since`, newest first: what the workload
    page draws over its traffic charts."""
    await _own(workload_id, viewer, db)
    return [AutoscaleDecisionRow.model_validate(r)
            for r in await store.decisions_of(db, workload_id, limit=limit, since=since, changes_only=True)]


async def approve(workload_id: str, tick: int, *, approve: bool, comment: str, principal: Principal,
                  db: asyncpg.Pool, temporal: Client) -> AutoscalerStatus:
    """Let a scale-out past the team's budget go ahead (or not): the autoscaler waits for this, like a draft."""
    await _own(workload_id, principal, db)
    approval = DecisionApproval(tick=tick, approve=approve, by=principal.name, comment=comment)
    try:
        return await autoscaler_handle(temporal, workload_id).execute_update(
            contract.UPDATE_APPROVE, approval, result_type=AutoscalerStatus)
    except WorkflowUpdateFailedError as err:
        raise ApiError(409, getattr(err.cause, "message", None) or str(err.cause or err),
                       code="nothing_to_approve") from None
    except RPCError as err:
        raise ApiError(404, f"workload {workload_id} has no autoscaler running ({err.message})") from None


async def _own(workload_id: str, principal: Principal, db: asyncpg.Pool) -> dict:
    row = await workload_store.get_workload(db, workload_id)
    not_found = ApiError(404, f"workload {workload_id} not found")
    if row is None:
        raise not_found
    hide(principal, "workload", workload_id, row["team"], not_found)
    return row


async def _event(db: asyncpg.Pool, workload_id: str, kind: str, principal: Principal, detail: dict) -> None:
    async with db.acquire() as conn:
        await events.record_event(conn, subject_kind="workload", source="api", step=f"{kind}:{uuid.uuid4().hex}",
                                  subject=workload_id, kind=kind, actor=principal.name, detail=detail,
                                  team=principal.team)

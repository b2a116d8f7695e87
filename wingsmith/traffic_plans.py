"""Traffic plans in flight, fair between teams: an identical plan already running is joined, not searched
again; a team holds at most `Settings.traffic_plans_per_team` plans at once, and past that it is told to come
back (`TooManyPlans`, the API's 429 with Retry-After) instead of filling the perf queue other teams wait on.

Both hold across API replicas because the state is Temporal's own: a plan's workflow id is the digest of
what it asks (one running per id), and a team's plans in flight are the slot workflows
`traffic-plan-slot/<team>/<n>`, n below the bound (one running per id: starting one is the atomic
"take a slot", its end frees it). contracts/traffic_plan.py has the two workflows' contract.
"""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from contracts import traffic_plan as contract
from contracts.traffic_plan import (
    TrafficPlanInput,
    TrafficPlanResult,
    TrafficPlanSlotInput,
    TrafficPlanTurn,
    plan_workflow_id,
    slot_workflow_id,
)

# What a refused caller is told to wait: a cached plan frees its slot in milliseconds, a cold search in a
# minute or more; half a minute neither hammers the API nor leaves a freed slot idle for long.
RETRY_AFTER_SECONDS = 30


class TooManyPlans(Exception):
    def __init__(self, team: str, bound: int) -> None:
        super().__init__(f"team {team} already has {bound} traffic plan{'s' if bound != 1 else ''} in flight "
                         f"(at most {bound} at once, so that other teams' plans are not kept waiting); try again "
                         f"when one has answered, in about {RETRY_AFTER_SECONDS} s")
        self.team = team
        self.bound = bound
        self.retry_after = RETRY_AFTER_SECONDS


async def _running_run(client: Client, workflow_id: str) -> str | None:
    """The run id of the workflow with this id if it is running now."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return described.run_id if described.status == WorkflowExecutionStatus.RUNNING else None


async def _wait_for_plan(client: Client, workflow_id: str, run_id: str | None = None) -> TrafficPlanResult:
    handle = client.get_workflow_handle(workflow_id, run_id=run_id, result_type=TrafficPlanResult)
    return await handle.result()


async def run_traffic_plan(client: Client, params: TrafficPlanInput, *, team: str, bound: int,
                           task_queue: str) -> TrafficPlanResult:
    """The plans for `params`, from the identical plan already running if there is one, else from a plan of
    the team's own; raises TooManyPlans when the team already has `bound` plans in flight."""
    plan_id = plan_workflow_id(params)
    # Joining needs no slot: it adds no search. (Two identical asks at the same instant may both miss here;
    # then both take a slot, one starts the plan, and the other's slot finds it running and ends at once.)
    run_id = await _running_run(client, plan_id)
    if run_id is not None:
        return await _wait_for_plan(client, plan_id, run_id)
    slot_input = TrafficPlanSlotInput(plan_id=plan_id, plan=params)
    summary = f"traffic plan of team {team}: {params.ask.model} on {', '.join(params.ask.cards)}"
    for slot in range(bound):
        try:
            handle = await client.start_workflow(
                contract.SLOT_WORKFLOW, slot_input, id=slot_workflow_id(team, slot), task_queue=task_queue,
                result_type=TrafficPlanTurn, execution_timeout=contract.SLOT_TIMEOUT,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE, static_summary=summary)
        except WorkflowAlreadyStartedError:
            continue  # this slot holds another of the team's plans
        turn = await handle.result()
        if turn.joined is not None:
            return await _wait_for_plan(client, turn.joined)
        assert turn.result is not None
        return turn.result
    raise TooManyPlans(team, bound)

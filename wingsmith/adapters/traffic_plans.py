"""Traffic plans in flight, fair between teams: an identical plan already running is joined, not searched
again; a team holds at most `Settings.traffic_plans_per_team` plans at once, and past that it is told to come
back (`TooManyPlans`, the API's 429 with Retry-After) instead of filling the perf queue other teams wait on.

Both hold across API replicas because the state is Temporal's own: a plan's workflow id is the digest of
what it asks (one running per id), and a team's plans in flight are the slot workflows
`traffic-plan-slot/<team>/<n>`, n below the bound (one running per id: starting one is the atomic
"take a slot", its end frees it). contracts/traffic_plan.py has the two workflows' contract.

A cold plan takes a minute or more, so nobody has to hold a request open for it (issue 52): `start_traffic_plan`
answers with the plans when they are ready within seconds (kept from an identical plan that just ended, or
answered from the perf worker's cache), else with the plan workflow's id, and `plan_state` reads that workflow:
how far it is (its activity's beats, contracts.perf.PlanningBeat), or its answer once it has one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from contracts import traffic_plan as contract
from contracts.perf import ACTIVITY_PLAN_TARGET, MAX_CARDS, PlanningBeat
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
# An identical plan that ended this recently answers at once: a create right after its dry-run gets the plan
# the dry-run showed. Later asks plan again (the perf worker's cache answers each card in milliseconds).
PLAN_KEPT = timedelta(minutes=30)
# A plan's workflow starts a moment after its slot does; a ticket this young whose plan Temporal does not know
# yet is starting, an older one is gone.
STARTING_WITHIN = timedelta(minutes=2)
# A ticket holds one workload request (its free-text fields are bounded): a few hundred bytes in practice.
MAX_TICKET_CHARS = 8192


class TooManyPlans(Exception):
    def __init__(self, team: str, bound: int) -> None:
        super().__init__(f"team {team} already has {bound} traffic plan{'s' if bound != 1 else ''} in flight "
                         f"(at most {bound} at once, so that other teams' plans are not kept waiting); try again "
                         f"when one has answered, in about {RETRY_AFTER_SECONDS} s")
        self.team = team
        self.bound = bound
        self.retry_after = RETRY_AFTER_SECONDS


async def _described(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _wait_for_plan(client: Client, workflow_id: str, run_id: str | None = None) -> TrafficPlanResult:
    handle = client.get_workflow_handle(workflow_id, run_id=run_id, result_type=TrafficPlanResult)
    return await handle.result()


class PlanProgress(BaseModel):
    """How far a traffic plan is, for whoever follows it."""

    state: Literal["starting", "queued", "searching"] = Field(
        description="starting: asking whether a perf worker polls; queued: waiting for the perf worker (busy with "
                    "other searches); searching: the perf worker is planning the cards one by one")
    planned: list[str] = Field(default_factory=list, description="cards planned so far")
    searching: str | None = Field(default=None, description="the card being planned now")
    started_at: datetime | None = None
    seconds: float = Field(default=0.0, description="since the plan started")


class PlanEnded(Exception):
    """The plan's workflow ended without an answer (failed, timed out, terminated)."""


def _kept(described: WorkflowExecutionDescription) -> bool:
    closed = described.close_time
    return (described.status == WorkflowExecutionStatus.COMPLETED and closed is not None
            and datetime.now(UTC) - closed < PLAN_KEPT)


async def _answer(turn: WorkflowHandle[object, TrafficPlanTurn], client: Client) -> TrafficPlanResult:
    """A slot's plan: its own, or the identical one it found running."""
    taken = await turn.result()
    if taken.joined is not None:
        return await _wait_for_plan(client, taken.joined)
    assert taken.result is not None
    return taken.result


async def start_traffic_plan(client: Client, params: TrafficPlanInput, *, team: str, bound: int, task_queue: str,
                             within: float) -> TrafficPlanResult | str:
    """The plans for `params` when they are there within `within` seconds, else the id of the plan's workflow
    to follow (`plan_state`). An identical plan that is running is joined and one that ended in the last
    PLAN_KEPT answers at once (neither takes a slot); otherwise the plan runs in one of the team's slots, and
    TooManyPlans is raised when the team already has `bound` plans in flight."""
    plan_id = plan_workflow_id(params)
    # Joining needs no slot: it adds no search. (Two identical asks at the same instant may both miss here;
    # then both take a slot, one starts the plan, and the other's slot finds it running and ends at once.)
    described = await _described(client, plan_id)
    if described is not None and _kept(described):
        kept = await _wait_for_plan(client, plan_id, described.run_id)
        if kept.unavailable is None:  # no perf worker then: there may be one now
            return kept
    if described is not None and described.status == WorkflowExecutionStatus.RUNNING:
        waiting = _wait_for_plan(client, plan_id, described.run_id)
    else:
        waiting = _answer(await _take_slot(client, params, plan_id, team=team, bound=bound, task_queue=task_queue),
                          client)
    try:
        return await asyncio.wait_for(waiting, within)
    except TimeoutError:
        return plan_id


async def _take_slot(client: Client, params: TrafficPlanInput, plan_id: str, *, team: str, bound: int,
                     task_queue: str) -> WorkflowHandle[object, TrafficPlanTurn]:
    slot_input = TrafficPlanSlotInput(plan_id=plan_id, plan=params)
    summary = f"traffic plan of team {team}: {params.ask.model} on {', '.join(params.ask.cards)}"
    for slot in range(bound):
        try:
            return await client.start_workflow(
                contract.SLOT_WORKFLOW, slot_input, id=slot_workflow_id(team, slot), task_queue=task_queue,
                result_type=TrafficPlanTurn, execution_timeout=contract.SLOT_TIMEOUT,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE, static_summary=summary)
        except WorkflowAlreadyStartedError:
            continue  # this slot holds another of the team's plans
    raise TooManyPlans(team, bound)


async def plan_state(client: Client, plan_id: str) -> TrafficPlanResult | PlanProgress | None:
    """The plan's answer once its workflow has one, how far it is while it runs, or None when Temporal does
    not know the workflow (not started yet, or long gone). Raises PlanEnded when it ended without an answer."""
    described = await _described(client, plan_id)
    if described is None:
        return None
    if described.status == WorkflowExecutionStatus.COMPLETED:
        return await _wait_for_plan(client, plan_id, described.run_id)
    if described.status != WorkflowExecutionStatus.RUNNING:
        status = described.status.name.lower().replace("_", " ") if described.status else "ended"
        raise PlanEnded(f"the traffic plan {plan_id} ended without an answer ({status})")
    progress = PlanProgress(state="starting", started_at=described.start_time,
                            seconds=round((datetime.now(UTC) - described.start_time).total_seconds(), 1))
    for pending in described.raw_description.pending_activities:
        if pending.activity_type.name != ACTIVITY_PLAN_TARGET:
            continue  # the first step asks whether a perf worker polls: still starting
        if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED:
            return progress.model_copy(update={"state": "queued"})
        beat = PlanningBeat()
        if pending.heartbeat_details.payloads:
            [beat] = await client.data_converter.decode(list(pending.heartbeat_details.payloads), [PlanningBeat])
        return progress.model_copy(update={"state": "searching", "planned": beat.planned,
                                           "searching": beat.searching})
    return progress


class PlanTicket(BaseModel):
    """What a traffic plan's status URL carries, so that any API replica can answer it without a table: the
    workload request it answers and the cards planned for it. The plan's workflow id follows from them and
    the approved artifact (nothing in a ticket is taken on trust: the request is checked again, as a new one
    would be), and when it was issued (see STARTING_WITHIN)."""

    request: dict[str, Any]
    cards: list[str] = Field(min_length=1, max_length=MAX_CARDS)
    issued: datetime

    def encode(self) -> str:
        return base64.urlsafe_b64encode(zlib.compress(self.model_dump_json().encode(), 9)).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> PlanTicket | None:
        """The ticket, or None for anything that is not one (bounded before it is inflated)."""
        if len(text) > MAX_TICKET_CHARS:
            return None
        try:
            inflate = zlib.decompressobj()
            raw = inflate.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), 4 * MAX_TICKET_CHARS)
            if inflate.unconsumed_tail or not inflate.eof:  # past the bound, or cut short (its checksum missing)
                return None
            return cls.model_validate_json(raw)
        except (binascii.Error, ValueError, zlib.error, ValidationError):
            return None

    def young(self) -> bool:
        return datetime.now(UTC) - self.issued < STARTING_WITHIN

"""Planning by load: a workload asked for with a traffic target instead of a replica count is planned by
AIConfigurator, one plan per candidate card (the one asked for, then every card the fleet offers), through the
perf queue (wingsmith/adapters/traffic_plans.py). A plan the perf worker has cached is there at once; a cold one takes
minutes, and the caller is answered with where to follow it (`Planning`, issue 52)."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from api.auth import Principal
from api.errors import ApiError, temporal_unavailable
from api.responses import Planning
from api.services.inventories import LiveReads
from contracts.perf import MAX_CARDS, TargetInput
from contracts.traffic_plan import PLAN_TIMEOUT, TrafficPlanInput, TrafficPlanResult, plan_workflow_id
from wingsmith.adapters.store import clusters as cluster_store
from wingsmith.adapters.temporal import workflow_ui_url
from wingsmith.adapters.traffic_plans import (
    PLAN_KEPT,
    PlanEnded,
    PlanProgress,
    PlanTicket,
    TooManyPlans,
    plan_state,
    start_traffic_plan,
)
from wingsmith.domain.config import Settings, perf_task_queue
from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.perf.traffic import TrafficTarget
from wingsmith.domain.target_plan import TargetChoice, choose_card
from wingsmith.domain.workloads import ApprovedArtifact, WorkloadRequest

# A plan the perf worker has cached is there within this (a workflow, an activity, milliseconds per card).
ANSWER_WITHIN_SECONDS = 3.0
# Where a plan is followed: `GET /v1/workloads/plans/{ticket}` (api/routes/workloads.py).
STATUS_PATH = "/v1/workloads/plans/{ticket}"


def patience(wait: float | None) -> float:
    """How long a caller waits for a plan before it is answered with where to follow it: what it asked for
    (`Prefer: wait=<seconds>`), bounded by the plan's own time limit, else a few seconds, which a plan the
    perf worker has cached meets."""
    if wait is None:
        return ANSWER_WITHIN_SECONDS
    return min(max(wait, 0.0), PLAN_TIMEOUT.total_seconds())


async def plan_for_target(body: WorkloadRequest, artifact: ApprovedArtifact, *, principal: Principal,
                          db: asyncpg.Pool, temporal: Client | None, settings: Settings, live_reads: LiveReads,
                          wait: float) -> TargetChoice | Planning:
    """AIConfigurator's plan per candidate card (`fleet`) and the chosen one (the cheapest per hour when every
    feasible card has a price, else the fewest GPUs) when the plan is there within `wait` seconds; otherwise
    where to follow it. A 429 with Retry-After when the caller's team already has its bound of plans in flight."""
    assert body.target is not None
    cards, prices = await fleet(body, db=db, temporal=temporal, settings=settings, live_reads=live_reads)
    params = plan_input(artifact, cards, body.target, settings)
    if temporal is None:
        raise temporal_unavailable()
    try:
        # An identical plan in flight is joined; the team's own plans in flight are bounded (fair between teams).
        started = await start_traffic_plan(temporal, params, team=principal.team,
                                           bound=settings.traffic_plans_per_team, task_queue=settings.task_queue,
                                           within=wait)
    except TooManyPlans as exc:
        raise ApiError(429, str(exc), code="too_many_plans", details={"team": exc.team, "bound": exc.bound},
                       headers={"Retry-After": str(exc.retry_after)}) from None
    except WorkflowFailureError as exc:
        raise ApiError(503, f"the traffic plan ended without an answer: {exc.cause or exc}; ask again",
                       code="perf_unavailable") from None
    except RPCError as exc:
        raise ApiError(503, f"Temporal could not take the traffic plan: {exc.message}") from None
    # How far it is (a joined plan may be well under way), or its answer if it came in between.
    answer = (await state_of(temporal, started) or PlanProgress(state="starting")) if isinstance(started, str) \
        else started
    if isinstance(answer, PlanProgress):
        ticket = PlanTicket(request=body.model_dump(mode="json", exclude_unset=True, exclude={"dry_run"}),
                            cards=cards, issued=datetime.now(UTC))
        return following(ticket.encode(), cards, params, settings, answer, create=not body.dry_run)
    return chosen(answer, prices)


def held_request(ticket: str) -> tuple[PlanTicket, WorkloadRequest]:
    """The ticket a status URL carries and the dry-run request it answers, or the 404 that says it is no
    plan this plane gave (nothing in a ticket is taken on trust: the request is checked again)."""
    held = PlanTicket.decode(ticket)
    if held is not None:
        try:
            return held, WorkloadRequest.model_validate({**held.request, "dry_run": True})
        except ValidationError:
            pass
    raise plan_gone()


def plan_gone() -> ApiError:
    return ApiError(404, "no such traffic plan (the status URL is not one this plane gave, or it is too old); "
                         "send the request again", code="plan_not_found")


async def fleet(body: WorkloadRequest, *, db: asyncpg.Pool, temporal: Client | None, settings: Settings,
                live_reads: LiveReads) -> tuple[list[str], dict[str, float]]:
    """The cards to plan (the one asked for, then every card the fleet offers: its manual inventories and,
    for the clusters without one, their live inventories, read by the worker) and the known prices."""
    records = await cluster_store.list_clusters(db)
    unread = [r for r in records if r.manual_inventory is None and not r.cordoned]
    live = await live_reads.inventories(temporal, settings, unread)
    offer = cluster_store.fleet_offer(records, {i.cluster: [p.hardware_id for p in i.pools] for i in live})
    cards = list(dict.fromkeys([get_hardware(body.hardware).id, *offer]))[:MAX_CARDS]
    return cards, {card: price for card, price in offer.items() if price is not None}


def plan_input(artifact: ApprovedArtifact, cards: list[str], target: TrafficTarget,
               settings: Settings) -> TrafficPlanInput:
    ask = TargetInput(model=artifact.repo_id, model_commit=artifact.sha, config=artifact.config, cards=cards,
                      target=target)
    return TrafficPlanInput(ask=ask, perf_task_queue=perf_task_queue(settings.task_queue))


def following(ticket: str, cards: list[str], params: TrafficPlanInput, settings: Settings, progress: PlanProgress,
              *, create: bool) -> Planning:
    """Where to follow the plan, and how far it is."""
    workflow_id = plan_workflow_id(params)
    return Planning(status_url=STATUS_PATH.format(ticket=ticket), workflow_id=workflow_id,
                    workflow_url=workflow_ui_url(settings, workflow_id), cards=cards, progress=progress,
                    then=("once the status URL answers with the plan, send this create again: it gets that plan at "
                          f"once (a plan is kept {PLAN_KEPT.total_seconds() / 60:.0f} minutes)") if create else
                    "GET the status URL until it answers with the plan")


def chosen(answer: TrafficPlanResult, prices: dict[str, float]) -> TargetChoice:
    """The card chosen among the plans, or the refusal: 503 without a perf worker, 422 naming the best
    each card reaches when none meets the target."""
    if answer.unavailable:
        raise ApiError(503, answer.unavailable, code="perf_unavailable")
    choice = choose_card(answer.plans, prices)
    if choice.chosen is None:
        raise ApiError(422, choice.refusal or "no card meets the target", code="target_unreachable",
                       details={"candidates": [c.model_dump(mode="json") for c in choice.candidates]})
    return choice


async def state_of(temporal: Client | None, plan_id: str) -> TrafficPlanResult | PlanProgress | None:
    """The plan's answer, how far it is, or None when Temporal does not know it (yet, or any more)."""
    if temporal is None:
        raise temporal_unavailable()
    try:
        return await plan_state(temporal, plan_id)
    except PlanEnded as exc:
        raise ApiError(503, f"{exc}; ask again", code="perf_unavailable") from None
    except RPCError as exc:
        raise ApiError(503, f"Temporal could not be asked about the traffic plan: {exc.message}") from None

"""A workload from a traffic target's choice (wingsmith/domain/target_plan.py): the chosen plan, or, when the
recipe or the fit check cannot run it, the next one in the choice's own order. Pure; the create route and
its dry-run use it, and the dry-run's candidates say which plans were skipped and why.

AIConfigurator knows the model's architecture, not the recipe: it may choose a parallelism or a card the
recipe does not offer (a TP size it never tested, a card it marks unsupported), or a decode worker too small
for the plane's fit check. Such a plan is not the end of the request while another plan meets the target.
"""

from __future__ import annotations

from wingsmith.domain.perf.traffic import CardPlan
from wingsmith.domain.recipes import Catalog
from wingsmith.domain.target_plan import Candidate, TargetChoice, choose_card
from wingsmith.domain.workloads import (
    ApprovedArtifact,
    InvalidWorkload,
    WorkloadPlan,
    WorkloadRequest,
    plan_configuration,
)

# Plans tried before giving up: each try is a recipe lookup and a fit check (milliseconds), and a target
# rarely has more than a plan per mode on each of a few cards.
MAX_TRIES = 8
# Refusals about the candidate (its card, its shape); others (the artifact, the engine) are the same for
# every candidate, so trying the next one would only repeat them.
_ABOUT_THE_CANDIDATE = ("hardware", "layout", "layout/features")


def _prices(choice: TargetChoice) -> dict[str, float]:
    """The prices per GPU-hour the choice was made with, from its candidates' costs."""
    return {c.plan.card: c.cost_per_hour / c.plan.gpus for c in choice.candidates
            if c.cost_per_hour is not None and c.plan.gpus > 0}


def _same(a: CardPlan, b: CardPlan) -> bool:
    return a.card == b.card and a.configuration == b.configuration


def plan_first_runnable(request: WorkloadRequest, choice: TargetChoice, artifact: ApprovedArtifact, catalog: Catalog,
                        *, image: str, namespace: str, hf_token_secret: str | None,
                        tries: int = MAX_TRIES) -> tuple[WorkloadPlan, TargetChoice]:
    """The plan of the first choice the recipe can run, and the choice as it ended: the plans skipped keep
    their place among the candidates with why they were skipped. Raises InvalidWorkload when no plan that
    meets the target can run (or `tries` were refused), naming each refusal."""
    prices = _prices(choice)
    skipped: list[Candidate] = []
    while choice.chosen is not None:
        chosen = choice.chosen
        try:
            plan = plan_configuration(request, chosen, artifact, catalog, image=image, namespace=namespace,
                                      hf_token_secret=hf_token_secret)
        except InvalidWorkload as exc:
            if exc.field not in _ABOUT_THE_CANDIDATE:
                raise
            mode = chosen.configuration.mode if chosen.configuration else None
            skipped.append(Candidate(plan=chosen, mode=mode, cost_per_hour=next(
                (c.cost_per_hour for c in choice.candidates if _same(c.plan, chosen)), None),
                why_not=f"skipped: the plane cannot run it: {exc}"))
            if len(skipped) >= tries:
                break
            rest = [c.plan for c in choice.candidates if not any(_same(c.plan, s.plan) for s in skipped)]
            choice = choose_card(rest, prices)
            continue
        return plan, _with_skipped(choice, skipped)
    reasons = "; ".join(f"{s.plan.card} ({s.mode}): {(s.why_not or '').removeprefix('skipped: ')}" for s in skipped)
    ended = _with_skipped(choice, skipped)
    raise InvalidWorkload(f"no plan that meets the target can run: {reasons or choice.refusal}", field="target",
                          details={"candidates": [c.model_dump(mode="json") for c in ended.candidates]})


def _with_skipped(choice: TargetChoice, skipped: list[Candidate]) -> TargetChoice:
    rest = [c for c in choice.candidates if not any(_same(c.plan, s.plan) for s in skipped)]
    return choice.model_copy(update={"candidates": [*skipped, *rest]})

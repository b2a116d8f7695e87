"""The new-workload form's fit check in words (issue 52): a plan sized by a traffic target set
`--max-num-seqs 128 (AIConfigurator (AIConfigurator 0.12.0, …))`, the tool named twice, and the fit
check beside it said "16 concurrent sequences" while the plan set 128. The plan is a real one (the
adapter's reading of AIConfigurator's own answer, tests/perf/fixtures); the fit check is the plane's."""

from __future__ import annotations

import re
from html import unescape

import pytest

from console.new_workload import Check
from console.rendering import templates
from tests.perf.test_target_sized_plan import sized_plan
from wingsmith.domain.placement.models import PlacementDecision
from wingsmith.domain.workloads import WorkloadPlan


def _check_words(plan: WorkloadPlan) -> str:
    placement = PlacementDecision(plan=plan.placement, replicas={}, placed=0, unplaced=plan.replicas,
                                  summary="no cluster registered", clusters=[])
    html = templates.env.get_template("_workload_check.html").render(check=Check(plan=plan, placement=placement))
    fit = html[html.index('id="check-fit"'):]
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", fit[:fit.index("</p>")])).split())


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_the_tool_is_named_once_and_each_concurrency_says_what_it_counts(mode):
    plan = sized_plan(mode)
    words = _check_words(plan)
    assert plan.max_num_seqs is not None and plan.max_num_seqs != plan.fit["concurrency"]
    assert words.count("AIConfigurator") == 1, words
    assert "AIConfigurator (AIConfigurator" not in plan.max_num_seqs_source
    assert f"up to {plan.max_num_seqs} sequences at once ( --max-num-seqs : AIConfigurator 0." in words, words
    # The fit check's sequences are the check's load at the full context, not what the engine runs.
    holds = plan.fit["largest_concurrency"]
    assert (f"with the KV cache of {plan.fit['concurrency']} sequence(s) at the full context of "
            f"{plan.fit['context']:,} tokens (the fit check's load); the cache holds {holds:,} such sequences at once"
            in words), words
    assert "concurrent sequences" not in words and "waits for room" not in words
    # An engine allowed more sequences than the cache holds at the full context says what happens past it.
    more = _check_words(plan.model_copy(update={"max_num_seqs": holds * 2}))
    assert f"up to {holds * 2} sequences at once" in more, more
    assert f"past {holds:,} at the full context, vLLM waits for room in the cache" in more, more


def test_a_plan_from_before_the_check_said_what_the_cache_holds_still_reads():
    plan = sized_plan("agg")
    old = plan.model_copy(update={"fit": {k: v for k, v in plan.fit.items() if k != "largest_concurrency"},
                                  "max_num_seqs": None, "max_num_seqs_source": "engine default"})
    words = _check_words(old)
    assert "the cache holds" not in words and "(the fit check's load)." in words, words
    assert "--max-num-seqs is not set: the engine's default applies (engine default)." in words, words

"""A workload sized from a traffic target keeps what it was sized by, and an upgrade runs the same
configuration on the new artifact (or is refused, naming it); a create whose chosen plan the recipe cannot
run takes the next plan in the choice's order. The configurations are AIConfigurator's own answer
(tests/perf/fixtures/qwen3-8b-h200-recommend) read by the adapter's parser; no figure is repeated here.
Pure: no AIConfigurator, Temporal or database."""

from __future__ import annotations

import pytest

from activities.upgrade import upgrade_request_of
from contracts.upgrade import UpgradeRequest
from tests.perf.test_disaggregated_plan import CARD, MODEL, TARGET, _card_plan, _int, _rows
from tests.upstream import snapshot_config, snapshot_meta
from wingsmith.adapters.perf.aiconfigurator import configuration_from_row
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.dynamo.engine_args import flag_value
from wingsmith.domain.perf.traffic import CardPlan, plan_card
from wingsmith.domain.recipes import evidence_for
from wingsmith.domain.target_plan import choose_card
from wingsmith.domain.target_workload import plan_first_runnable
from wingsmith.domain.workloads import (
    ApprovedArtifact,
    InvalidWorkload,
    SizedBy,
    WorkloadPlan,
    WorkloadRequest,
    kept_shape_problem,
    plan_configuration,
    plan_workload,
    replan_sized,
)

OLD, NEW = "c" * 40, "d" * 40
WHERE = {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", "namespace": "default", "hf_token_secret": None}
# The flags AIConfigurator's configuration sets on each pool (wingsmith.domain.workloads.pool_engine_args).
TOOL_FLAGS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--max-num-seqs",
              "--max-num-batched-tokens", "--kv-transfer-config")


def artifact(sha: str, *, unsupported: str | None = None) -> ApprovedArtifact:
    catalog = load_catalog()
    evidence = evidence_for(catalog.find(MODEL), catalog).model_dump(mode="json")
    if unsupported:  # the recipe of this version says the card cannot run the model
        evidence["hardware"] = [{**h, "status": "unsupported"} if h["id"] == unsupported else h
                                for h in evidence["hardware"]]
        if not any(h["id"] == unsupported for h in evidence["hardware"]):
            evidence["hardware"].append({"id": unsupported, "status": "unsupported"})
    return ApprovedArtifact(id=f"{MODEL}@{sha}", repo_id=MODEL, sha=sha, state="approved", draft_version=1,
                            evidence=evidence, config=snapshot_config(MODEL),
                            weight_bytes=snapshot_meta(MODEL)["total_size_bytes"])


def by_mode(mode: str) -> CardPlan:
    plan = _card_plan()
    found = next(p for p in (plan, *plan.alternatives) if p.configuration and p.configuration.mode == mode)
    return found.model_copy(update={"alternatives": []})


def sized_plan(mode: str) -> WorkloadPlan:
    request = WorkloadRequest(artifact_id=f"{MODEL}@{OLD}", hardware=CARD, target=TARGET, name=f"qwen-{mode}")
    return plan_configuration(request, by_mode(mode), artifact(OLD), load_catalog(), **WHERE)


def upgraded(current: WorkloadPlan, to: ApprovedArtifact, **change) -> WorkloadPlan:
    asked = upgrade_request_of(current, UpgradeRequest(artifact_id=to.id, **change))
    return replan_sized(current, asked, to, load_catalog())


def tool_flags(args: list[str]) -> dict[str, str | None]:
    return {flag: flag_value(args, (flag,)) for flag in TOOL_FLAGS}


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_the_plan_keeps_the_target_and_the_chosen_configuration(mode):
    chosen = by_mode(mode)
    plan = sized_plan(mode)
    sized = plan.sized_by
    assert sized is not None and chosen.configuration is not None
    assert (sized.target, sized.card, sized.configuration, sized.replicas, sized.gpus, sized.source) == (
        chosen.target, chosen.card, chosen.configuration, chosen.replicas, chosen.gpus, chosen.source)
    assert (sized.target.isl, sized.target.osl) == (TARGET.isl, TARGET.osl)
    # It travels with the plan through every workflow and the registry: a JSON round trip keeps it, and it is small.
    again = WorkloadPlan.model_validate_json(plan.model_dump_json())
    assert again.sized_by == sized and again == plan
    assert len(sized.model_dump_json()) < 2048


def test_a_plan_recorded_before_plans_kept_their_sizing_still_reads():
    stored = sized_plan("agg").model_dump(mode="json")
    del stored["sized_by"]
    assert WorkloadPlan.model_validate(stored).sized_by is None


def test_an_unbounded_configuration_is_refused():
    sized = sized_plan("disagg").sized_by
    assert sized is not None
    three = sized.configuration.model_copy(update={"workers": [*sized.configuration.workers] * 2})
    with pytest.raises(ValueError, match="2 worker pools, not 4"):
        SizedBy.model_validate({**sized.model_dump(), "configuration": three.model_dump()})


def test_an_aggregated_upgrade_keeps_the_tool_s_batch_size_token_budget_and_parallelism():
    current = sized_plan("agg").model_copy(update={"replicas": 23})  # scaled after it was created
    row = _rows("agg")[0]
    new = upgraded(current, artifact(NEW))
    assert new.artifact_id == f"{MODEL}@{NEW}" and new.artifact_sha == NEW
    assert new.sized_by == current.sized_by and new.max_num_seqs_source == current.max_num_seqs_source
    assert (new.hardware, new.layout, new.gpus_per_replica) == (current.hardware, current.layout,
                                                                current.gpus_per_replica)
    assert new.replicas == new.placement.replicas == 23
    assert tool_flags(new.worker.args) == tool_flags(current.worker.args)
    assert _int(new.worker.args, "--max-num-seqs") == new.max_num_seqs == int(row["bs"])
    assert _int(new.worker.args, "--tensor-parallel-size") == int(row["tp"])
    # What re-planning from the recipe alone would have lost (the reason the plan keeps its sizing).
    from_recipe = plan_workload(upgrade_request_of(current, UpgradeRequest(artifact_id=f"{MODEL}@{NEW}")),
                                artifact(NEW), load_catalog(), **WHERE)
    assert tool_flags(from_recipe.worker.args) != tool_flags(new.worker.args)


def test_a_disaggregated_upgrade_keeps_its_prefill_and_decode_pools():
    current = sized_plan("disagg")
    new = upgraded(current, artifact(NEW))
    assert current.prefill is not None and new.prefill is not None
    assert (new.layout, new.hardware, new.replicas, new.gpus_per_replica) == (
        "pd_cluster", CARD, current.replicas, current.gpus_per_replica)
    for old_pool, new_pool in ((current.prefill, new.prefill), (current.worker, new.worker)):
        assert tool_flags(new_pool.args) == tool_flags(old_pool.args)
        assert (new_pool.workers_per_replica, new_pool.gpus_per_node, new_pool.nodes) == (
            old_pool.workers_per_replica, old_pool.gpus_per_node, old_pool.nodes)
    assert new.placement == current.placement and new.sized_by == current.sized_by
    assert new.fit["sized_pool"] == "decode" and new.fit["fits"]


def test_an_upgrade_to_an_artifact_that_cannot_run_the_configuration_is_refused_naming_it():
    current = sized_plan("disagg")
    with pytest.raises(InvalidWorkload) as refused:
        upgraded(current, artifact(NEW, unsupported=CARD))
    words = str(refused.value)
    assert words.startswith(f"{MODEL}@{NEW} cannot run the configuration this workload was sized by (")
    assert str(current.sized_by) in words and "unsupported" in words and refused.value.field == "hardware"


def test_an_upgrade_may_not_change_the_layout_of_a_sized_workload():
    current = sized_plan("disagg")
    assert kept_shape_problem(current, None) is None and kept_shape_problem(current, "pd_cluster") is None
    problem = kept_shape_problem(current, "multi_node_tp")
    assert problem is not None and "cannot change the layout to multi_node_tp" in problem
    assert str(current.sized_by) in problem


def test_a_workload_sized_before_plans_kept_their_sizing_is_not_re_planned_silently():
    legacy = sized_plan("disagg").model_copy(update={"sized_by": None})
    problem = kept_shape_problem(legacy, None)
    assert problem is not None and "prefill and decode pools" in problem and "create a new workload" in problem
    # A workload sized by replicas is upgraded as before.
    by_replicas = plan_workload(WorkloadRequest(artifact_id=f"{MODEL}@{OLD}", hardware=CARD), artifact(OLD),
                                load_catalog(), **WHERE)
    assert kept_shape_problem(by_replicas, None) is None


def _two_cards() -> list[CardPlan]:
    """The fixture's plans on h200 (disaggregated first) and its aggregated rows offered on b200 too."""
    return [_card_plan(), plan_card("b200", TARGET, [configuration_from_row("agg", row, None)
                                                     for row in _rows("agg")])]


def test_a_create_skips_the_plans_the_recipe_cannot_run_and_says_why():
    choice = choose_card(_two_cards())
    assert choice.chosen is not None and choice.chosen.card == CARD  # the fixture's disaggregated plan wins
    request = WorkloadRequest(artifact_id=f"{MODEL}@{OLD}", hardware=CARD, target=TARGET)
    plan, ended = plan_first_runnable(request, choice, artifact(OLD, unsupported=CARD), load_catalog(), **WHERE)
    assert ended.chosen is not None and ended.chosen.card == "b200" and plan.hardware == "b200"
    assert plan.sized_by is not None and plan.sized_by.card == "b200"
    why = {(c.plan.card, c.mode): c.why_not for c in ended.candidates}
    assert set(why) == {(CARD, "disagg"), (CARD, "agg"), ("b200", "agg")} and why[("b200", "agg")] is None
    skipped = why[(CARD, "disagg")] or ""
    assert skipped.startswith("skipped: the plane cannot run it: ") and "unsupported" in skipped
    assert ended.candidates[0].plan.card == CARD and ended.candidates[0].mode == "disagg"  # named first
    # The next choice is made as the first was: h200's aggregated plan ties with b200's and comes after it.
    assert (why[(CARD, "agg")] or "").startswith("ties with b200 (agg)")


def test_a_create_that_can_run_none_of_the_plans_is_refused_with_each_reason():
    choice = choose_card([_card_plan()])
    request = WorkloadRequest(artifact_id=f"{MODEL}@{OLD}", hardware=CARD, target=TARGET)
    with pytest.raises(InvalidWorkload) as refused:
        plan_first_runnable(request, choice, artifact(OLD, unsupported=CARD), load_catalog(), **WHERE)
    words = str(refused.value)
    assert words.startswith("no plan that meets the target can run: ") and refused.value.field == "target"
    assert f"{CARD} (disagg): the plane cannot run it" in words and f"{CARD} (agg): the plane cannot run it" in words
    assert len(refused.value.details["candidates"]) == 2


def test_the_tries_are_bounded():
    choice = choose_card(_two_cards())
    request = WorkloadRequest(artifact_id=f"{MODEL}@{OLD}", hardware=CARD, target=TARGET)
    with pytest.raises(InvalidWorkload) as refused:
        plan_first_runnable(request, choice, artifact(OLD, unsupported=CARD), load_catalog(), **WHERE, tries=1)
    assert f"{CARD} (disagg)" in str(refused.value) and f"{CARD} (agg)" not in str(refused.value)

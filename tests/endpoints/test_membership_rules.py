"""Which workloads an endpoint may route to (the rule the API and EndpointWorkflow.set_workloads share):
all of them serve the endpoint's model, a Hugging Face repository."""

from __future__ import annotations

import pytest

from wingsmith.domain.endpoints import WorkloadFacts, endpoint_model, membership_problems

FACTS = {w.workload_id: w for w in (
    WorkloadFacts(workload_id="kimi-a", state="serving", served_model_name="kimi-k3", repo_id="moonshotai/Kimi-K3"),
    WorkloadFacts(workload_id="kimi-new", state="rolling_out", served_model_name="kimi-k3-0612",
                  repo_id="MoonshotAI/Kimi-K3"),
    WorkloadFacts(workload_id="qwen", state="serving", served_model_name="qwen3-8b", repo_id="Qwen/Qwen3-8B"),
    WorkloadFacts(workload_id="qwen-named", state="serving", served_model_name="kimi-k3", repo_id="Qwen/Qwen3-8B"),
    WorkloadFacts(workload_id="gone", state="deleted", served_model_name="kimi-k3", repo_id="moonshotai/Kimi-K3"),
    WorkloadFacts(workload_id="leaving", state="deleting", served_model_name="kimi-k3", repo_id="moonshotai/Kimi-K3"),
)}


@pytest.mark.parametrize(("wanted", "model", "problem"), [
    (["kimi-a"], None, None),
    (["qwen"], None, None),  # a new endpoint takes the model its workloads agree on
    (["kimi-a", "kimi-new"], None, None),  # one repository (any spelling), two served names
    (["kimi-a", "qwen"], None, "the workloads serve different models (moonshotai/kimi-k3, qwen/qwen3-8b)"),
    (["kimi-a", "kimi-new"], "moonshotai/kimi-k3", None),
    (["kimi-new"], "moonshotai/kimi-k3", None),  # no workload stays: still the same model
    # The swap: nothing of the old list stays and the new workload serves another model, even under the
    # endpoint's own name (a served name is a label, not the model).
    (["qwen"], "moonshotai/kimi-k3", "endpoint kimi-k3 serves moonshotai/kimi-k3; every workload it routes to "
                                     "must serve that model (qwen serves Qwen/Qwen3-8B)"),
    (["qwen-named"], "moonshotai/kimi-k3", "qwen-named serves Qwen/Qwen3-8B"),
    (["kimi-a", "qwen"], "moonshotai/kimi-k3", "qwen serves Qwen/Qwen3-8B"),
    (["kimi-a", "nope"], "moonshotai/kimi-k3", "unknown workload(s): nope"),
    (["gone"], None, "workload(s) gone no longer serve"),
    (["leaving"], None, "workload(s) leaving no longer serve"),
    ([], None, "an endpoint needs at least one workload"),
])
def test_membership_problems(wanted, model, problem):
    problems = membership_problems("kimi-k3", wanted, FACTS, model)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_the_endpoint_model_is_its_workloads_repository():
    assert endpoint_model(FACTS, ["ghost", "kimi-new", "qwen"]) == "moonshotai/kimi-k3"
    assert endpoint_model(FACTS, ["ghost"]) is None and endpoint_model(FACTS, []) is None

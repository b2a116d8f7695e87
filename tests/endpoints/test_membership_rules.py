"""Which workloads an endpoint may route to (the rule the API and EndpointWorkflow.set_workloads share)."""

from __future__ import annotations

import pytest

from wingsmith.endpoints import WorkloadFacts, membership_problems

FACTS = {w.workload_id: w for w in (
    WorkloadFacts(workload_id="kimi-a", state="serving", served_model_name="kimi-k3", repo_id="moonshotai/Kimi-K3"),
    WorkloadFacts(workload_id="kimi-new", state="rolling_out", served_model_name="kimi-k3-0612",
                  repo_id="MoonshotAI/Kimi-K3"),
    WorkloadFacts(workload_id="qwen", state="serving", served_model_name="qwen3-8b", repo_id="Qwen/Qwen3-8B"),
    WorkloadFacts(workload_id="qwen-named", state="serving", served_model_name="kimi-k3", repo_id="Qwen/Qwen3-8B"),
    WorkloadFacts(workload_id="gone", state="deleted", served_model_name="kimi-k3", repo_id="moonshotai/Kimi-K3"),
    WorkloadFacts(workload_id="leaving", state="deleting", served_model_name="kimi-k3", repo_id="moonshotai/Kimi-K3"),
)}


@pytest.mark.parametrize(("wanted", "staying", "problem"), [
    (["kimi-a"], [], None),
    (["kimi-a", "kimi-new"], ["kimi-a"], None),  # same repository (any spelling), another served name
    (["kimi-a", "qwen-named"], ["kimi-a"], None),  # serves the endpoint's name
    (["qwen"], [], None),  # a new endpoint takes what it is given: nothing to compare with yet
    (["kimi-a", "qwen"], ["kimi-a"], "serve neither 'kimi-k3' nor the model of the endpoint's other workloads"),
    (["kimi-a", "nope"], ["kimi-a"], "unknown workload(s): nope"),
    (["gone"], [], "workload(s) gone no longer serve"),
    (["leaving"], [], "workload(s) leaving no longer serve"),
    ([], [], "an endpoint needs at least one workload"),
])
def test_membership_problems(wanted, staying, problem):
    problems = membership_problems("kimi-k3", wanted, FACTS, staying)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems

"""A traffic target's aggregated configuration larger than a node runs on a multi-node layout (issue 52: the
README's Kimi-K3 example, whose plan is one TP16 replica per 16 H200 GPUs, was refused as "single_node_tp runs
on one node" because the request's default layout stood). A layout the request names as multi-node stands.
Pure: no AIConfigurator, Temporal or database; the configuration is the shape AIConfigurator 0.12 answers for
that example (tests/cli/test_readme_journey.py asks it for real)."""

from __future__ import annotations

import pytest

from tests.upstream import snapshot_config, snapshot_meta
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.dynamo.engine_args import flag_value
from wingsmith.domain.perf.estimates import Configuration, Parallelism, Pool
from wingsmith.domain.perf.traffic import TrafficTarget, plan_card
from wingsmith.domain.recipes import evidence_for
from wingsmith.domain.workloads import ApprovedArtifact, WorkloadRequest, plan_configuration

KIMI = "moonshotai/Kimi-K3"
SHA = "e" * 40
TARGET = TrafficTarget(requests_per_second=0.1, isl=4000, osl=1000, ttft_ms=2000, tpot_ms=40)
WHERE = {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", "namespace": "default", "hf_token_secret": None}


def _kimi() -> ApprovedArtifact:
    catalog = load_catalog()
    match = catalog.find(KIMI)
    assert match is not None
    return ApprovedArtifact(id=f"{KIMI}@{SHA}", repo_id=KIMI, sha=SHA, state="approved", draft_version=1,
                            evidence=evidence_for(match, catalog).model_dump(mode="json"),
                            config=snapshot_config(KIMI), weight_bytes=snapshot_meta(KIMI)["total_size_bytes"])


def _tp16() -> Configuration:
    parallel = Parallelism(tp=16, moe_tp=16)
    return Configuration(mode="agg", tokens_per_second_per_gpu=6.054, tokens_per_second_per_user=25.0, ttft_ms=1301.0,
                         tpot_ms=39.99, concurrency=4, gpus=16, replicas=1, gpus_per_replica=16,
                         requests_per_second_per_replica=0.097, parallelism=str(parallel),
                         workers=[Pool(workers=1, gpus_per_worker=16, parallelism=parallel, batch_size=4)])


@pytest.mark.parametrize(("asked", "runs"), [("single_node_tp", "multi_node_tp"), (None, "multi_node_tp"),
                                             ("multi_node_tp_dp", "multi_node_tp_dp")])
def test_a_replica_larger_than_a_node_runs_on_a_multi_node_layout(asked, runs):
    chosen = plan_card("h200", TARGET, [_tp16()])
    assert chosen.meets_target and chosen.replicas == 2
    named = {"layout": asked} if asked else {}
    request = WorkloadRequest(artifact_id=f"{KIMI}@{SHA}", hardware="h200", target=TARGET, name="kimi-t", **named)
    plan = plan_configuration(request, chosen, _kimi(), load_catalog(), **WHERE)
    assert (plan.layout, plan.replicas, plan.gpus_per_replica) == (runs, 2, 16)
    assert plan.worker.nodes == 2 and plan.worker.gpus_per_node == 8
    # The tool's parallelism, whichever layout carries it.
    assert flag_value(plan.worker.args, ("--tensor-parallel-size",)) == "16"

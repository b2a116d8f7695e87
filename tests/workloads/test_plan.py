"""Planning a workload against the approved draft: pure, with the real catalog and real configs."""

from __future__ import annotations

import pytest

from tests.upstream import snapshot_config
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.recipes import evidence_for
from wingsmith.domain.workloads import ApprovedArtifact, InvalidWorkload, WorkloadRequest, plan_workload

SHA = "a" * 40


def _artifact(repo: str, config_from: str, weight_bytes: int, state: str = "approved", **extra) -> ApprovedArtifact:
    catalog = load_catalog()
    evidence = evidence_for(catalog.find(repo), catalog).model_dump(mode="json")
    config = snapshot_config(config_from)
    return ApprovedArtifact(id=f"{repo}@{SHA}", repo_id=repo, sha=SHA, state=state, draft_version=1,
                            evidence=evidence, config=config, weight_bytes=weight_bytes, **extra)


KIMI_K3 = ("moonshotai/Kimi-K3", "moonshotai/Kimi-K3", 1_560_860_324_864)


def _plan(artifact, **request):
    return plan_workload(WorkloadRequest(artifact_id=artifact.id, **request), artifact, load_catalog(),
                         image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", namespace="default",
                         hf_token_secret="hf-token")


def test_kimi_k3_on_h200_multi_node_tp_dp_is_planned_with_its_sizes():
    plan = _plan(_artifact(*KIMI_K3), hardware="h200", layout="multi_node_tp_dp", replicas=2)
    assert plan.gpus_per_replica == 16 and plan.worker.nodes == 2 and plan.worker.gpus_per_node == 8
    assert plan.placement.nodes_per_replica == 2 and plan.placement.gpus_per_node == 8
    assert plan.fit["fits"] is True
    assert plan.hf_model_id == "moonshotai/Kimi-K3" and plan.hf_revision == SHA


def test_the_dynamo_default_is_applied_and_named_on_gb200():
    plan = _plan(_artifact(*KIMI_K3), hardware="gb200", layout="multi_node_tp_dp", replicas=1)
    assert plan.max_num_seqs == 256
    assert plan.max_num_seqs_source.startswith("recipes/kimi-k3/vllm/agg-gb200-agentic/deploy.yaml@")
    assert plan.worker.args[-2:] == ["--max-num-seqs", "256"]


def test_a_variant_in_another_repo_serves_that_checkpoint():
    nvfp4_bytes = 1_375_000_000_000  # what the draft's sizing derived for the NVFP4 checkpoint
    plan = _plan(_artifact(*KIMI_K3, variant_weight_bytes={"nvfp4": nvfp4_bytes}), hardware="b300",
                 layout="single_node_tp", variant="nvfp4")
    assert plan.hf_model_id == "RedHatAI/Kimi-K3-NVFP4" and plan.hf_revision is None
    assert plan.weight_bytes == nvfp4_bytes  # the fit check sized the variant, not the default checkpoint


@pytest.mark.parametrize("artifact_kw, request_kw, says", [
    ({"state": "draft"}, {"hardware": "h200", "layout": "multi_node_tp_dp"}, "not approved"),
    ({"superseded_by": "moonshotai/Kimi-K3@" + "b" * 40}, {"hardware": "h200", "layout": "multi_node_tp_dp"},
     "superseded"),
    ({}, {"hardware": "mi355x"}, "NVIDIA hardware only"),
    ({}, {"hardware": "h200", "layout": "zigzag"}, "unknown layout"),
    ({}, {"hardware": "h200", "layout": "multi_node_tp_dp", "context": 1_000_000, "concurrency": 256},
     "does not fit"),
    ({}, {"hardware": "h200", "engine": "sglang"}, "not supported"),
])
def test_invalid_requests_say_why(artifact_kw, request_kw, says):
    with pytest.raises(InvalidWorkload, match=says):
        _plan(_artifact(*KIMI_K3, **artifact_kw), **request_kw)


def test_text_only_and_encoder_parallel_exclude_each_other():
    # Kimi-K2.5 has both features (upstream says they exclude each other only in prose).
    k25 = _artifact("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2-Instruct", 595_000_000_000)
    with pytest.raises(InvalidWorkload, match="text_only.*encoder_parallel|encoder_parallel.*text_only"):
        _plan(k25, hardware="gb200", layout="multi_node_tp", features=["text_only", "encoder_parallel"])


def test_the_follow_policy_is_manual_unless_asked_and_rides_in_the_plan():
    artifact = _artifact(*KIMI_K3)
    assert _plan(artifact, hardware="gb200", layout="multi_node_tp_dp").follow == "manual"
    assert _plan(artifact, hardware="gb200", layout="multi_node_tp_dp", follow="auto").follow == "auto"
    with pytest.raises(ValueError, match="follow"):
        WorkloadRequest(artifact_id=artifact.id, hardware="gb200", follow="sometimes")

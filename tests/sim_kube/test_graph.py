"""Reading upstream Dynamo recipes the way the simulated operator does."""

from __future__ import annotations

import pytest
import yaml

from sim.kube.graph import components, served_model_names
from tests.upstream import require_upstream

RECIPES = require_upstream("dynamo", "recipes")  # upstream tier


def _dgd(relative: str) -> dict:
    docs = yaml.safe_load_all((RECIPES / relative / "deploy.yaml").read_text())
    return next(d for d in docs if d and d.get("kind") == "DynamoGraphDeployment")


@pytest.mark.parametrize(("recipe", "served", "workers"), [
    # v1beta1, env-expanded `--served-model-name "${SERVED_MODEL_NAME}"`, 4 trays x 4 GB200
    ("kimi-k3/vllm/agg-gb200-agentic", ["moonshotai/Kimi-K3"], [("VllmDecodeWorker", "decode", 1, 4, 4)]),
    # v1alpha1 services map with prefill/decode sub-components and `gpu` resource limits
    ("llama-3-70b/vllm/disagg-single-node", ["RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"],
     [("VllmPrefillWorker", "prefill", 2, 1, 2), ("VllmDecodeWorker", "decode", 1, 1, 4)]),
    ("deepseek-r1/sglang/disagg-8gpu", ["deepseek-ai/DeepSeek-R1"],
     [("decode", "decode", 1, 1, 8), ("prefill", "prefill", 1, 1, 8)]),
    ("kimi-k2.5/trtllm/agg-round-robin", ["nvidia/Kimi-K2.5-NVFP4"], [("agg", "worker", 3, 2, 4)]),
])
def test_components_and_served_name(recipe, served, workers):
    dgd = _dgd(recipe)
    assert served_model_names(dgd) == served
    found = [(c.name, c.type, c.replicas, c.node_count, c.gpus_per_pod) for c in components(dgd) if not c.is_frontend]
    assert found == workers


def test_no_flags_falls_back_to_the_deployment_name():
    dgd = {"metadata": {"name": "plain"}, "spec": {"components": [{"name": "w", "type": "worker"}]}}
    assert served_model_names(dgd) == ["plain"]

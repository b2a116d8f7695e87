"""Issue 48 item 3: the variant a checkpoint id asks for is found by its exact id first, then by the precision
the id names, then the recipe's default. Fixtures in upstream's recipe format (models/<org>/<repo>.yaml)."""

from __future__ import annotations

import pytest

from tests.recipes.conftest import catalog_of
from wingsmith.domain.recipes import evidence_for
from wingsmith.domain.workloads import ApprovedArtifact, WorkloadRequest, plan_workload

# The default variant is NVFP4 in NVIDIA's repo; the BF16 variant names the recipe's own id as its checkpoint.
_BF16_IS_THE_RECIPE_ID = """
meta: {title: Twin-30B, hardware: {b200: verified, h200: verified}}
model: {model_id: fixture-lab/Twin-30B, architecture: moe, parameter_count: 30B}
variants:
  default:
    precision: nvfp4
    model_id: nvidia/Twin-30B-NVFP4
    vram_minimum_gb: 18
  bf16:
    precision: bf16
    model_id: fixture-lab/Twin-30B
    vram_minimum_gb: 72
compatible_strategies: [single_node_tp]
"""
# Variants of one repo that differ only in precision (the FP8 one quantises online).
_BY_PRECISION = """
meta: {title: Online-8B, hardware: {h200: verified}}
model: {model_id: fixture-lab/Online-8B, architecture: dense}
variants:
  default: {precision: bf16, vram_minimum_gb: 19}
  fp8: {precision: fp8, vram_minimum_gb: 10, extra_args: [--quantization, fp8]}
compatible_strategies: [single_node_tp]
"""


@pytest.fixture
def twin_catalog(tmp_path, catalog):
    return catalog_of(tmp_path, catalog, {"Twin-30B": _BF16_IS_THE_RECIPE_ID, "Online-8B": _BY_PRECISION})


def test_a_checkpoint_that_is_exactly_a_variants_model_id_matches_that_variant(twin_catalog):
    match = twin_catalog.find("fixture-lab/Twin-30B")
    assert match is not None and (match.variant, match.matched_by) == ("bf16", "variant model_id")
    nvfp4 = twin_catalog.find("NVIDIA/Twin-30B-NVFP4")
    assert nvfp4 is not None and nvfp4.variant == "default"


def test_then_by_the_precision_the_id_names_then_the_default(twin_catalog):
    assert twin_catalog.find("fixture-lab/Online-8B").variant == "default"
    by_word = twin_catalog.find("fixture-lab/Online-8B", precision="fp8")
    assert by_word is not None and (by_word.variant, by_word.matched_by) == ("fp8", "variant precision")


def test_a_workload_of_the_bf16_artifact_serves_the_bf16_checkpoint(twin_catalog):
    match = twin_catalog.find("fixture-lab/Twin-30B")
    evidence = evidence_for(match, twin_catalog).model_dump(mode="json")
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 48,
              "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 32768,
              "torch_dtype": "bfloat16"}
    artifact = ApprovedArtifact(id="fixture-lab/Twin-30B@" + "a" * 40, repo_id="fixture-lab/Twin-30B", sha="a" * 40,
                                state="approved", draft_version=1, evidence=evidence, config=config,
                                weight_bytes=60_000_000_000)
    plan = plan_workload(WorkloadRequest(artifact_id=artifact.id, hardware="h200"), artifact, twin_catalog,
                         image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", namespace="default", hf_token_secret=None)
    assert plan.variant == "bf16" and plan.hf_model_id == "fixture-lab/Twin-30B" and plan.hf_revision == "a" * 40

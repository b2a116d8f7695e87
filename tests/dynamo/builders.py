"""Rollout specs built from real recipe data, and DGD validation against the shipped CRD."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

import jsonschema

from sim.kube.resources import DEFAULT_CRD_DIR
from wingsmith.domain.dynamo import Engine, Layout, RolloutSpec, WorkerPool

# The DGD CRD as the repository ships it (built from upstream by `python -m sim.kube.build_crds`).
CRD_PATH = DEFAULT_CRD_DIR / "nvidia.com_dynamographdeployments.json"
KIMI_K3_WEIGHT_BYTES = 1_560_860_324_864  # hf-configs/moonshotai/Kimi-K3/meta.json

ARTIFACT_SHA = "3f1e0c9a7b5d2e4f6a8c0b1d3e5f7a9c2b4d6e8f"
DRAFT_REVISION = ARTIFACT_SHA
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0-kimi-k3-dev.1"


@lru_cache(maxsize=1)
def dgd_schema(strict: bool = True) -> dict[str, Any]:
    crd = json.loads(CRD_PATH.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")
    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    if strict:
        _forbid_unknown(schema)
    return schema


def _forbid_unknown(node: Any) -> None:
    """An API server silently prunes fields its structural schema does not know; forbidding
    them here turns a misspelt field into a test failure instead of a silently dropped setting."""
    if isinstance(node, dict):
        if (node.get("type") == "object" and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for value in node.values():
            _forbid_unknown(value)
    elif isinstance(node, list):
        for value in node:
            _forbid_unknown(value)


def validate_dgd(dgd: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(dgd_schema()).validate(dgd)


# Arguments as wingsmith.domain.recipes' serve_command synthesises them from the vLLM Kimi-K3 recipe
# (base args, layout sizes, hardware block, on-by-default features), frozen here so the golden
# files pin the renderer alone.
_BLACKWELL_TAIL = ["--load-format", "fastsafetensors", "--no-enable-flashinfer-autotune",
                   "--max-model-len", "1048576", "--kv-cache-dtype", "fp8", "--attention-config",
                   '{"use_prefill_query_quantization":true,"mla_prefill_backend":"flashinfer"}',
                   "--enable-prefix-caching"]
_FEATURES = ["--reasoning-parser", "kimi_k3", "--enable-auto-tool-choice", "--tool-call-parser", "kimi_k3"]
_BASE = ["--trust-remote-code", "--gpu-memory-utilization", "0.95"]

KIMI_K3_ARGS: dict[tuple[str, str], list[str]] = {
    ("b300", "single_node_tp"): _BASE + ["--tensor-parallel-size", "8"] + _BLACKWELL_TAIL + _FEATURES,
    ("b200", "multi_node_tp"): _BASE + ["--tensor-parallel-size", "16"] + _BLACKWELL_TAIL + _FEATURES,
    ("b200", "multi_node_tep"): _BASE + ["--enable-expert-parallel", "--tensor-parallel-size", "16"]
    + _BLACKWELL_TAIL + _FEATURES,
    ("b200", "multi_node_tp_pp"): ["--trust-remote-code", "--gpu-memory-utilization", "0.90",
                                   "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
                                   "--max-num-batched-tokens", "8192"] + _BLACKWELL_TAIL + _FEATURES,
    ("b200", "multi_node_dep"): _BASE + ["--enable-expert-parallel", "--data-parallel-hybrid-lb",
                                         "--data-parallel-size", "16", "--data-parallel-size-local", "8"]
    + _BLACKWELL_TAIL + _FEATURES,
    ("h200", "multi_node_tp_dp"): [
        "--trust-remote-code", "--gpu-memory-utilization", "0.97", "--tensor-parallel-size", "8",
        "--data-parallel-size", "2", "--data-parallel-size-local", "1", "--max-num-seqs", "5",
        "--max-model-len", "32768", "--moe-backend", "marlin", "--disable-custom-all-reduce",
        "--no-enable-flashinfer-autotune", "--max-num-batched-tokens", "4096", "--attention-backend",
        "FLASHMLA"] + _FEATURES,
    ("gb200", "multi_node_tp_dp"): _BASE + ["--tensor-parallel-size", "4", "--data-parallel-size", "4",
                                            "--data-parallel-size-local", "1"] + _BLACKWELL_TAIL + _FEATURES,
}
KIMI_K3_PD_B300 = {
    "prefill": _BASE + ["--tensor-parallel-size", "8", "--enable-expert-parallel", "--port", "8001",
                        "--kv-transfer-config",
                        '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}',
                        "--max-num-batched-tokens", "16384", "--no-disable-hybrid-kv-cache-manager",
                        "--no-enable-flashinfer-autotune"] + _FEATURES,
    "decode": _BASE + ["--tensor-parallel-size", "1", "--data-parallel-size", "8",
                       "--data-parallel-size-local", "8", "--enable-expert-parallel", "--port", "8002",
                       "--kv-transfer-config",
                       '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}',
                       "--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}',
                       "--data-parallel-hybrid-lb", "--no-enable-prefix-caching", "--max-num-seqs", "8",
                       "--max-num-batched-tokens", "32", "--no-disable-hybrid-kv-cache-manager"] + _FEATURES,
}
PD_ENV = {"VLLM_SSM_CONV_STATE_LAYOUT": "DS", "UCX_TLS": "rc,cuda_copy"}
BLACKWELL_ENV = {"VLLM_ALLREDUCE_USE_FLASHINFER": "1", "VLLM_ENGINE_READY_TIMEOUT_S": "3600",
                 "VLLM_USE_V2_MODEL_RUNNER": "1", "VLLM_USE_RUST_FRONTEND": "1"}
HOPPER_ENV = {"VLLM_ENGINE_READY_TIMEOUT_S": "3600", "VLLM_USE_V2_MODEL_RUNNER": "1",
              "VLLM_USE_RUST_FRONTEND": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
GPUS_PER_NODE = {"b300": 8, "b200": 8, "h200": 8, "gb200": 4}


def kimi_k3_spec(hardware: str, layout: str, **overrides: Any) -> RolloutSpec:
    layout_enum = Layout(layout)
    gpn = GPUS_PER_NODE[hardware]
    base: dict[str, Any] = dict(
        workload_id="kimi-k3-chat", cluster="sim-east", artifact_id="moonshotai/Kimi-K3",
        artifact_sha=ARTIFACT_SHA, draft_version=3, served_model_name="kimi-k3",
        hf_model_id="moonshotai/Kimi-K3", hf_revision=DRAFT_REVISION, engine=Engine.vllm,
        layout=layout_enum, hardware_id=hardware, image=IMAGE, runtime_version=None,
        namespace="models", hf_token_secret="hf-token", model_cache_pvc="model-cache",
        env=HOPPER_ENV if hardware == "h200" else BLACKWELL_ENV,
    )
    if layout_enum is Layout.pd_cluster:
        base.update(
            worker=WorkerPool(args=KIMI_K3_PD_B300["decode"], gpus_per_node=gpn, nodes=8 // gpn),
            prefill=WorkerPool(args=KIMI_K3_PD_B300["prefill"], gpus_per_node=gpn, nodes=8 // gpn),
            max_num_seqs=8, max_num_seqs_source="vLLM recipe moonshotai/Kimi-K3 pd_cluster decode",
            env={**base["env"], **PD_ENV})
    else:
        args = KIMI_K3_ARGS[(hardware, layout)]
        world = {"b200": 16, "h200": 16, "gb200": 16, "b300": 8}[hardware]
        base["worker"] = WorkerPool(args=args, gpus_per_node=gpn, nodes=world // gpn)
        if "--max-num-seqs" in args:
            base.update(max_num_seqs=5, max_num_seqs_source="vLLM recipe moonshotai/Kimi-K3 hopper override")
        else:
            base.update(max_num_seqs=None, max_num_seqs_source="no aggregated vLLM Dynamo recipe for "
                        f"moonshotai/Kimi-K3 on {hardware}: engine default")
    base.update(overrides)
    return RolloutSpec(**base)


def small_spec(**overrides: Any) -> RolloutSpec:
    """A small single-GPU model for emulator tests."""
    base: dict[str, Any] = dict(
        workload_id="qwen3-8b", cluster="sim-east", artifact_id="Qwen/Qwen3-8B", artifact_sha=ARTIFACT_SHA,
        draft_version=1, served_model_name="qwen3-8b", hf_model_id="Qwen/Qwen3-8B", hardware_id="h200",
        worker=WorkerPool(args=["--tensor-parallel-size", "1"], gpus_per_node=1),
        image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", namespace="default",
        max_num_seqs=256, max_num_seqs_source="test")
    base.update(overrides)
    return RolloutSpec(**base)

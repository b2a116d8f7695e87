from __future__ import annotations

import os
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from tests.dynamo.builders import KIMI_K3_ARGS, KIMI_K3_PD_B300, kimi_k3_spec, small_spec, validate_dgd
from wingsmith.domain.dynamo import Engine, Layout, RenderError, WorkerPool, dgd_name, render_dgd
from wingsmith.domain.dynamo.render import SPEC_HASH_ANNOTATION, spec_hash

GOLDEN = Path(__file__).parent / "golden"
CASES = [*KIMI_K3_ARGS, ("b300", "pd_cluster")]


def _workers(dgd):
    return [c for c in dgd["spec"]["components"] if c["type"] != "frontend"]


def _main(component):
    return next(c for c in component["podTemplate"]["spec"]["containers"] if c["name"] == "main")


def _parallel_world(args: list[str]) -> int:
    """GPUs a vLLM argument list uses, read independently of the renderer's own parser."""
    sizes = {"--tensor-parallel-size": 1, "--pipeline-parallel-size": 1, "--data-parallel-size": 1}
    for flag, value in zip(args, args[1:], strict=False):
        if flag in sizes:
            sizes[flag] = int(value)
    return sizes["--tensor-parallel-size"] * sizes["--pipeline-parallel-size"] * sizes["--data-parallel-size"]


@pytest.mark.parametrize(("hardware", "layout"), CASES, ids=[f"{h}-{lay}" for h, lay in CASES])
def test_every_layout_renders_a_dgd_the_crd_accepts(hardware, layout):
    dgd = render_dgd(kimi_k3_spec(hardware, layout))
    validate_dgd(dgd)
    assert dgd["apiVersion"] == "nvidia.com/v1beta1" and dgd["kind"] == "DynamoGraphDeployment"
    types = sorted(c["type"] for c in dgd["spec"]["components"])
    assert types == (["decode", "frontend", "prefill"] if layout == "pd_cluster" else ["frontend", "worker"])


@pytest.mark.parametrize(("hardware", "layout"), CASES, ids=[f"{h}-{lay}" for h, lay in CASES])
def test_nodes_times_gpus_per_node_is_the_layouts_gpu_count(hardware, layout):
    dgd = render_dgd(kimi_k3_spec(hardware, layout))
    for worker in _workers(dgd):
        nodes = worker.get("multinode", {}).get("nodeCount", 1)
        gpus = int(_main(worker)["resources"]["limits"]["nvidia.com/gpu"])
        assert nodes * gpus == _parallel_world(_main(worker)["args"])
        if Layout(layout).multi_node:
            assert nodes >= 2 and nodes * gpus == 16
        assert _main(worker)["resources"]["requests"]["nvidia.com/gpu"] == str(gpus)


def test_a_pool_whose_arguments_use_other_gpus_than_it_places_is_refused():
    spec = kimi_k3_spec("b200", "multi_node_tp",
                        worker=WorkerPool(args=KIMI_K3_ARGS[("b200", "multi_node_tp")], gpus_per_node=8, nodes=3))
    with pytest.raises(RenderError, match=r"= 16 ranks but its worker reserves 3 node\(s\) × 8 GPUs = 24"):
        render_dgd(spec)


@pytest.mark.parametrize(("layout", "nodes", "message"), [
    ("multi_node_tp", 1, "at least 2 nodes"),
    ("single_node_tp", 2, "runs on one node"),
])
def test_layout_and_node_count_must_agree(layout, nodes, message):
    with pytest.raises(ValidationError, match=message):
        small_spec(layout=Layout(layout),
                   worker=WorkerPool(args=["--tensor-parallel-size", "8"], gpus_per_node=8, nodes=nodes))


def test_pd_cluster_needs_a_prefill_pool_and_other_layouts_refuse_one():
    with pytest.raises(ValidationError, match="needs a prefill pool"):
        kimi_k3_spec("b300", "pd_cluster", prefill=None)
    with pytest.raises(ValidationError, match="only valid for pd_cluster"):
        kimi_k3_spec("b300", "single_node_tp", prefill=WorkerPool(args=[], gpus_per_node=8))


def test_more_gpus_per_node_than_the_card_has_is_refused():
    with pytest.raises(ValidationError, match="GB200 NVL4 node has 4"):
        kimi_k3_spec("gb200", "multi_node_tp_dp",
                     worker=WorkerPool(args=["--tensor-parallel-size", "16"], gpus_per_node=8, nodes=2))


@pytest.mark.parametrize("hardware", ["mi355x", "tpu-v5"])
def test_hardware_that_cannot_be_placed_is_refused(hardware):
    with pytest.raises(ValidationError, match="cannot be placed|unknown hardware"):
        small_spec(hardware_id=hardware)


# --- golden files --------------------------------------------------------------------------------

GOLDEN_CASES = {
    "kimi-k3-single_node_tp-b300": ("b300", "single_node_tp"),
    "kimi-k3-multi_node_tp_dp-h200": ("h200", "multi_node_tp_dp"),
    "kimi-k3-pd_cluster-b300": ("b300", "pd_cluster"),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden(name):
    rendered = yaml.safe_dump(render_dgd(kimi_k3_spec(*GOLDEN_CASES[name])), sort_keys=False, width=120)
    path = GOLDEN / f"{name}.yaml"
    if os.environ.get("WINGSMITH_UPDATE_GOLDEN") == "1":
        path.write_text(rendered)
    assert path.exists(), f"{path} missing; run with WINGSMITH_UPDATE_GOLDEN=1 and review the diff"
    assert rendered == path.read_text()
    validate_dgd(yaml.safe_load(path.read_text()))


# --- spec hash -----------------------------------------------------------------------------------

def test_the_spec_hash_annotation_names_exactly_the_rendered_spec():
    dgd = render_dgd(small_spec())
    stamped = dgd["metadata"]["annotations"][SPEC_HASH_ANNOTATION]
    assert stamped == spec_hash(dgd["spec"]) and stamped.startswith("sha256:")
    # Key order is not content; the API server may hand the object back in any order.
    assert spec_hash(dict(reversed(list(dgd["spec"].items())))) == stamped
    assert render_dgd(small_spec())["metadata"]["annotations"][SPEC_HASH_ANNOTATION] == stamped
    edited = {**dgd["spec"], "backendFramework": "sglang"}
    assert spec_hash(edited) != stamped
    other = render_dgd(small_spec(max_num_seqs=128))
    assert other["metadata"]["annotations"][SPEC_HASH_ANNOTATION] != stamped


# --- arguments -----------------------------------------------------------------------------------

def test_worker_arguments_gain_identity_flags_and_lose_http_server_flags():
    dgd = render_dgd(kimi_k3_spec("b300", "pd_cluster"))
    decode = _main(next(c for c in _workers(dgd) if c["type"] == "decode"))["args"]
    pairs = dict(zip(decode, decode[1:], strict=False))
    assert decode[:2] == ["--model", "moonshotai/Kimi-K3"]
    assert pairs["--served-model-name"] == "kimi-k3"
    assert pairs["--revision"] == kimi_k3_spec("b300", "pd_cluster").hf_revision
    assert pairs["--disaggregation-mode"] == "decode"
    assert pairs["--max-num-seqs"] == "8"
    assert pairs["--dyn-tool-call-parser"] == "kimi_k3" and pairs["--dyn-reasoning-parser"] == "kimi_k3"
    for gone in ("--port", "--enable-auto-tool-choice", "--tool-call-parser"):
        assert gone not in decode
    # Everything else the recipe set survives, in the recipe's order.
    dropped = {"--port", "8002", "--enable-auto-tool-choice", "--tool-call-parser"}
    kept = [a for a in KIMI_K3_PD_B300["decode"] if a not in dropped]
    assert decode[2:2 + len(kept) - 2] == kept[:-2]  # the trailing `kimi_k3` value of the dropped parser


def test_per_node_rendezvous_flags_are_left_to_the_operator():
    node1 = KIMI_K3_ARGS[("b200", "multi_node_tp")] + [
        "--nnodes", "2", "--node-rank", "1", "--master-addr", "$HEAD_NODE_IP", "--headless"]
    spec = kimi_k3_spec("b200", "multi_node_tp",
                        worker=WorkerPool(args=node1, gpus_per_node=8, nodes=2))
    args = _main(_workers(render_dgd(spec))[0])["args"]
    assert not {"--nnodes", "--node-rank", "--master-addr", "--headless", "$HEAD_NODE_IP"} & set(args)


def test_rendering_its_own_arguments_again_changes_nothing():
    spec = kimi_k3_spec("b200", "multi_node_dep")
    first = render_dgd(spec)
    rendered_args = _main(_workers(first)[0])["args"]
    again = spec.model_copy(update={"worker": spec.worker.model_copy(update={"args": rendered_args})})
    assert render_dgd(again) == first == render_dgd(spec)


def test_a_vllm_serve_line_is_accepted():
    spec = small_spec(worker=WorkerPool(args=["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000"], gpus_per_node=1))
    args = _main(_workers(render_dgd(spec))[0])["args"]
    assert args[:2] == ["--model", "Qwen/Qwen3-8B"] and "--port" not in args


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "Qwen/Qwen3-32B"], r"--model 'Qwen/Qwen3-32B' but the artifact's model is 'Qwen/Qwen3-8B'"),
    (["--served-model-name", "other"], "served model name is 'qwen3-8b'"),
    (["--max-num-seqs", "64"], "applied max-num-seqs is '256'"),
    (["Qwen/Qwen3-8B"], "must start with a flag"),
    (["--tensor-parallel-size"], "has no value"),
    (["--tensor-parallel-size", "two"], "needs a whole number"),
])
def test_arguments_that_contradict_the_rollout_are_refused(args, message):
    with pytest.raises(RenderError, match=message):
        render_dgd(small_spec(worker=WorkerPool(args=args, gpus_per_node=1)))


def test_max_num_seqs_is_appended_named_and_sourced():
    dgd = render_dgd(small_spec(max_num_seqs=96, max_num_seqs_source="recipes/x/vllm/agg/deploy.yaml"))
    args = _main(_workers(dgd)[0])["args"]
    assert args[args.index("--max-num-seqs") + 1] == "96"
    notes = dgd["metadata"]["annotations"]
    assert notes["wingsmith.dev/max-num-seqs"] == "96"
    assert notes["wingsmith.dev/max-num-seqs-source"] == "recipes/x/vllm/agg/deploy.yaml"


def test_engine_default_max_num_seqs_adds_no_flag_but_says_so():
    dgd = render_dgd(small_spec(max_num_seqs=None, max_num_seqs_source="engine default"))
    assert "--max-num-seqs" not in _main(_workers(dgd)[0])["args"]
    assert dgd["metadata"]["annotations"]["wingsmith.dev/max-num-seqs"] == "engine default"


def test_an_unnamed_max_num_seqs_in_the_arguments_is_refused():
    spec = small_spec(max_num_seqs=None, worker=WorkerPool(args=["--max-num-seqs", "5"], gpus_per_node=1))
    with pytest.raises(RenderError, match="names no applied max_num_seqs"):
        render_dgd(spec)


# --- secrets, volumes, placement -----------------------------------------------------------------

def test_hugging_face_token_is_only_a_secret_reference():
    dgd = render_dgd(kimi_k3_spec("b300", "single_node_tp"))
    for component in dgd["spec"]["components"]:
        env = {e["name"]: e for e in _main(component)["env"]}
        assert env["HF_TOKEN"] == {"name": "HF_TOKEN",
                                   "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}}
        assert env["HF_HOME"]["value"] == "/model-cache"
        assert _main(component)["volumeMounts"] == [{"name": "model-cache", "mountPath": "/model-cache"}]
        assert component["podTemplate"]["spec"]["volumes"] == [
            {"name": "model-cache", "persistentVolumeClaim": {"claimName": "model-cache"}}]


@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_a_literal_token_in_env_is_refused(name):
    with pytest.raises(RenderError, match=f"{name} directly; name a secret"):
        render_dgd(small_spec(env={name: "hf_abcdef"}))


def test_no_secret_no_cache_renders_without_them():
    dgd = render_dgd(small_spec())
    validate_dgd(dgd)
    for component in dgd["spec"]["components"]:
        assert "volumes" not in component["podTemplate"]["spec"]
        assert all(e["name"] != "HF_TOKEN" for e in _main(component)["env"])


@pytest.mark.parametrize(("hardware", "label"), [("h200", "NVIDIA-H200"), ("b300", "NVIDIA-B300"),
                                                 ("gb200", "NVIDIA-GB200")])
def test_workers_select_nodes_by_gpu_product_and_the_frontend_takes_no_gpu(hardware, label):
    layout = "single_node_tp" if hardware != "gb200" else "multi_node_tp_dp"
    spec = small_spec(hardware_id=hardware) if layout == "single_node_tp" else kimi_k3_spec(hardware, layout)
    dgd = render_dgd(spec)
    for worker in _workers(dgd):
        assert worker["podTemplate"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": label}
    frontend = next(c for c in dgd["spec"]["components"] if c["type"] == "frontend")
    assert "resources" not in _main(frontend) and "nodeSelector" not in frontend["podTemplate"]["spec"]


def test_image_without_a_version_tag_needs_a_runtime_version():
    with pytest.raises(RenderError, match="set runtime_version"):
        render_dgd(small_spec(image="registry.local/dynamo/vllm:latest"))
    dgd = render_dgd(small_spec(image="registry.local/dynamo/vllm@sha256:" + "a" * 64, runtime_version="1.3.0"))
    validate_dgd(dgd)
    assert {c["runtimeVersionOverride"] for c in dgd["spec"]["components"]} == {"1.3.0"}


def test_labels_and_annotations_link_workload_artifact_and_draft():
    spec = kimi_k3_spec("b300", "single_node_tp")
    dgd = render_dgd(spec)
    meta = dgd["metadata"]
    assert meta["name"] == dgd_name("kimi-k3-chat", "sim-east") and meta["namespace"] == "models"
    assert meta["labels"]["wingsmith.dev/workload"] == "kimi-k3-chat"
    assert meta["labels"]["wingsmith.dev/artifact-sha"] == spec.artifact_sha
    assert meta["labels"]["wingsmith.dev/draft-version"] == "3"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "wingsmith"
    assert dgd["spec"]["labels"]["wingsmith.dev/workload"] == "kimi-k3-chat"
    assert meta["annotations"]["wingsmith.dev/artifact-id"] == "moonshotai/Kimi-K3"
    assert meta["annotations"]["wingsmith.dev/hf-revision"] == spec.hf_revision
    label_value = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
    for value in meta["labels"].values():
        assert len(value) <= 63 and label_value.match(value)


def test_a_workload_id_that_is_not_a_label_value_is_rewritten_for_labels_only():
    dgd = render_dgd(small_spec(workload_id="Team A/Qwen 8B"))
    assert label_value_ok(dgd["metadata"]["labels"]["wingsmith.dev/workload"])
    assert dgd["metadata"]["annotations"]["wingsmith.dev/workload-id"] == "Team A/Qwen 8B"


def label_value_ok(value: str) -> bool:
    return len(value) <= 63 and bool(re.match(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", value))


def test_the_crd_check_in_these_tests_can_fail():
    dgd = render_dgd(small_spec())
    dgd["spec"]["components"][1]["multinode"] = {"nodeCount": 1}  # the CRD's minimum is 2
    with pytest.raises(jsonschema.ValidationError):
        validate_dgd(dgd)
    dgd = render_dgd(small_spec())
    dgd["spec"]["components"][1]["sharedMemorySise"] = "1Gi"  # misspelt: a server would drop it
    with pytest.raises(jsonschema.ValidationError):
        validate_dgd(dgd)


# --- other engines -------------------------------------------------------------------------------

def test_sglang_from_the_dynamo_deepseek_r1_disaggregated_recipe():
    # deepseek-r1/sglang/disagg-8gpu: TP8 with DP attention (DP8 inside the TP group), EP8, per role.
    role = ["--tp", "8", "--dp", "8", "--enable-dp-attention", "--ep-size", "8", "--trust-remote-code",
            "--mem-fraction-static", "0.75", "--disaggregation-bootstrap-port", "30001"]
    spec = small_spec(engine=Engine.sglang, layout=Layout.pd_cluster, hf_model_id="deepseek-ai/DeepSeek-R1",
                      served_model_name="deepseek-ai/DeepSeek-R1", max_num_seqs=None,
                      image="nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.3.0",
                      worker=WorkerPool(args=role, gpus_per_node=8), prefill=WorkerPool(args=role, gpus_per_node=8))
    dgd = render_dgd(spec)
    validate_dgd(dgd)
    assert dgd["spec"]["backendFramework"] == "sglang"
    for worker in _workers(dgd):
        main = _main(worker)
        assert main["command"] == ["python3", "-m", "dynamo.sglang"]
        assert main["args"][:2] == ["--model-path", "deepseek-ai/DeepSeek-R1"]
        assert main["args"][main["args"].index("--disaggregation-mode") + 1] == worker["type"]


def test_trtllm_with_an_engine_config_file_renders():
    # kimi-k2.5/trtllm/agg-round-robin: parallelism lives in --extra-engine-args.
    args = ["--model-path", "nvidia/Kimi-K2.5-NVFP4", "--extra-engine-args", "/config/agg.yaml",
            "--publish-events-and-metrics", "--kv-block-size", "32"]
    spec = small_spec(engine=Engine.trtllm, hf_model_id="nvidia/Kimi-K2.5-NVFP4", hardware_id="gb200",
                      served_model_name="nvidia/Kimi-K2.5-NVFP4", max_num_seqs=None,
                      image="nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.3.0",
                      worker=WorkerPool(args=args, gpus_per_node=4))
    dgd = render_dgd(spec)
    validate_dgd(dgd)
    assert _main(_workers(dgd)[0])["command"] == ["python3", "-m", "dynamo.trtllm"]
    assert dgd["spec"]["backendFramework"] == "trtllm"


# --- the recipe catalog's commands (#4) render for every layout -----------------------------------

@pytest.mark.parametrize(("hardware", "layout"), [
    ("b300", "single_node_tp"), ("b200", "multi_node_tp"), ("b200", "multi_node_tep"),
    ("b200", "multi_node_tp_pp"), ("b200", "multi_node_dep"), ("h200", "multi_node_tp_dp"),
    ("gb200", "multi_node_tp_dp"), ("b300", "pd_cluster")])
def test_serve_commands_from_the_recipe_catalog_render_valid_graphs(hardware, layout):
    from wingsmith.adapters.recipes.files import load_catalog
    from wingsmith.domain.recipes.catalog import find_recipe
    from wingsmith.domain.recipes.command import serve_command

    catalog = load_catalog()
    cmd = serve_command(find_recipe(catalog, "moonshotai/Kimi-K3"), "default", hardware, layout, catalog=catalog)

    def pool(role_cmds):
        args = role_cmds[0].args
        return WorkerPool(args=args, gpus_per_node=cmd.gpus_per_node, nodes=len(role_cmds), env=role_cmds[0].env)

    if layout == "pd_cluster":
        prefill = pool([c for c in cmd.commands if c.role == "prefill"])
        worker = pool([c for c in cmd.commands if c.role == "decode"])
    else:
        worker, prefill = pool(cmd.commands), None
    stated = dict(zip(worker.args, worker.args[1:], strict=False)).get("--max-num-seqs")
    spec = kimi_k3_spec(hardware, layout, worker=worker, prefill=prefill, env={},
                        max_num_seqs=int(stated) if stated else None)
    dgd = render_dgd(spec)
    validate_dgd(dgd)
    gpus = sum(c.get("multinode", {}).get("nodeCount", 1) * int(_main(c)["resources"]["limits"]["nvidia.com/gpu"])
               for c in _workers(dgd))
    assert gpus == cmd.gpus

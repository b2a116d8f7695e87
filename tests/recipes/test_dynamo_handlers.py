"""The Dynamo importer's handlers, one upstream field or block each (issue 49 item 4): the component
blocks of either API version, what a container's command, env, node labels, claims and mounted
config files say, and how one graph becomes one catalog entry. Small inputs in upstream's shapes."""

from __future__ import annotations

import pytest

from wingsmith.domain.recipes import dynamo_components as dc
from wingsmith.domain.recipes import dynamo_import as di
from wingsmith.domain.recipes import dynamo_worker as dw
from wingsmith.domain.recipes.models import DynamoWorker, MaxConcurrency
from wingsmith.domain.recipes.problems import BadField, PartProblems


def _component(name: str = "VllmWorker", kind: str = "worker", *, args: list[str] | None = None,
               env: dict[str, str] | None = None, pod: dict | None = None, replicas: int | None = None,
               container: dict | None = None) -> dc.Component:
    main = {"args": args or [], "env": [{"name": k, "value": v} for k, v in (env or {}).items()], **(container or {})}
    return dc.Component(name, kind, None, replicas, None, 8, main, pod or {}, "spec.services.VllmWorker")


def _worker(role: str = "aggregated", card: str | None = None, label: str | None = None) -> DynamoWorker:
    return DynamoWorker(name=role, role=role, card=card, card_label=label,
                        max_concurrency=MaxConcurrency(setting="--max-num-seqs"))


# ---- dynamo_components: the blocks of a graph and of a pod -----------------------------------------

def test_argv_splits_a_shell_script_as_the_shell_would():
    container = {"command": ["/bin/sh", "-c"],
                 "args": ["exec python3 -m dynamo.vllm --model a/b \\\n  --served-model-name 'x y'  # tuned"]}
    assert dc.argv(container) == ["python3", "-m", "dynamo.vllm", "--model", "a/b", "--served-model-name", "x y"]
    assert dc.argv({"command": ["python3"], "args": ["-m", "dynamo.vllm"]}) == ["python3", "-m", "dynamo.vllm"]


def test_flag_value_takes_the_last_and_both_spellings():
    argv = ["--tp", "2", "--tp=4", "--max-num-seqs", "--enforce-eager"]
    assert dc.flag_value(argv, "--tp") == "4"
    assert dc.flag_value(argv, "--max-num-seqs") is None  # followed by a flag: no value
    assert dc.flag_value(argv, "--dp") is None


def test_v1beta1_components_merge_env_graph_first_and_read_gpus_from_the_container():
    spec = {"env": [{"name": "A", "value": "graph"}], "components": [{
        "name": "decode", "type": "worker", "subComponentType": "decode", "replicas": 2,
        "multinode": {"nodeCount": 2}, "env": [{"name": "B", "value": "comp"}],
        "podTemplate": {"spec": {"containers": [
            {"name": "sidecar"},
            {"name": "main", "env": [{"name": "C", "value": "main"}],
             "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}]}
    [comp] = dc.v1beta1_components(spec)
    assert [e["name"] for e in comp.container["env"]] == ["A", "B", "C"]
    assert (comp.name, comp.role, comp.replicas, comp.nodes, comp.gpus) == ("decode", "decode", 2, 2, 4)
    assert comp.field == "spec.components[0]"


def test_v1alpha1_components_read_services_envs_and_the_main_container():
    spec = {"envs": [{"name": "A", "value": "graph"}], "services": {"Frontend": {"componentType": "frontend"},
            "VllmPrefillWorker": {"componentType": "worker", "subComponentType": "prefill",
                                  "resources": {"limits": {"gpu": "2"}}, "envs": [{"name": "B", "value": "svc"}],
                                  "extraPodSpec": {"mainContainer": {"args": ["--tp", "2"]}}}}}
    frontend, prefill = dc.v1alpha1_components(spec)
    assert frontend.role is None
    assert (prefill.role, prefill.gpus, prefill.container["args"]) == ("prefill", 2, ["--tp", "2"])
    assert [e["name"] for e in prefill.container["env"]] == ["A", "B"]
    assert dc.components({"spec": spec})[1].field == "spec.services.VllmPrefillWorker"


def test_a_graph_with_neither_block_is_a_bad_field():
    with pytest.raises(BadField, match="neither a components list"):
        dc.components({"spec": {"services": ["not", "a", "map"]}})


def test_selected_reads_the_node_selector_and_required_affinity():
    pod = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
           "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
               {"matchExpressions": [{"key": "nvidia.com/gpu.product", "values": ["NVIDIA-B200"]},
                                     {"key": "other", "values": ["x"]}]}]}}}}
    assert dc.selected(pod, "nvidia.com/gpu.product") == ["NVIDIA-H200", "NVIDIA-B200"]
    gke = {"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}}
    assert dc.product_labels(gke) == ["nvidia-h100-80gb"]


def test_claimed_products_read_cel_selectors_of_the_named_templates():
    template = {"spec": {"spec": {"devices": {"requests": [
        {"exactly": {"selectors": [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == '
                                                          '"NVIDIA B200"'}}]}},
        {"firstAvailable": [{"selectors": [{"cel": {"expression": "productName == 'NVIDIA GB200'"}}]}]}]}}}}
    comp = _component(pod={"resourceClaims": [{"resourceClaimTemplateName": "gpus"},
                                              {"resourceClaimTemplateName": "absent"}]})
    assert dc.claimed_products(comp, {"gpus": template}) == ["NVIDIA B200", "NVIDIA GB200"]


@pytest.mark.parametrize("path, mount, expected", [
    ("/config/agg.yaml", {"name": "cfg", "mountPath": "/config/"}, 128),  # a directory mount
    ("/engine.yaml", {"name": "cfg", "mountPath": "/engine.yaml", "subPath": "agg.yaml"}, 128),  # one key
    ("/elsewhere/agg.yaml", {"name": "other", "mountPath": "/x"}, 128),  # any ConfigMap with that file name
    ("max_batch_size: 7\ntp: 2", {"name": "cfg", "mountPath": "/x"}, 7),  # inline YAML given through env
    ("/config/missing.yaml", {"name": "cfg", "mountPath": "/config"}, None),
])
def test_config_file_is_read_from_the_config_map_mounted_there(path, mount, expected):
    comp = _component(pod={"volumes": [{"name": "cfg", "configMap": {"name": "engine"}}]},
                      container={"volumeMounts": [mount]})
    config = dc.config_file(path, comp, {"engine": {"agg.yaml": "max_batch_size: 128\n"}})
    assert config.get("max_batch_size") == expected


# ---- dynamo_worker: what one worker states ---------------------------------------------------------

def test_names_from_flags_say_the_env_variable_and_skip_paths_and_unset_variables():
    comp = _component(args=["--model", "${MODEL_ID}", "--model-path", "/models/local",
                            "--served-model-name", "$UNSET/x"], env={"MODEL_ID": "org/Model-FP8"})
    assert dw.names_from_flags(dw.command_of(comp), {}) == [("org/Model-FP8", "--model from env MODEL_ID")]


def test_names_from_env_and_config_keep_their_order_and_skip_local_paths():
    comp = _component(env={"MODEL_PATH": "/weights", "MODEL": "org/b", "SERVED_MODEL_NAME": "org/a"})
    assert dw.names_from_env(dw.command_of(comp), {}) == [("org/a", "env SERVED_MODEL_NAME"), ("org/b", "env MODEL")]
    config = {"model": "org/c", "model-path": "/local", "served_model_name": 3}
    assert dw.names_from_config(dw.command_of(comp), config) == [("org/c", "config file key model")]


def test_model_names_dedupe_keep_the_first_source_and_the_served_name():
    comp = _component(args=["--model", "nvidia/M-NVFP4", "--served-model-name", "org/M"],
                      env={"MODEL_NAME": "org/M", "HF_MODEL_ID": "org/Other"})
    names = dw.model_names(dw.command_of(comp), {"model": "org/FromConfig"})
    assert names.names == ["nvidia/M-NVFP4", "org/M", "org/Other", "org/FromConfig"]
    assert names.source == "--model"
    assert names.served == ("org/M", "--served-model-name")
    assert dw.model_names(dw.command_of(_component(env={"MODEL": "org/E"})), {}).served is None


def test_engine_sizes_take_the_flag_else_the_config_file():
    command = dw.command_of(_component(args=["--tp", "${TP}"], env={"TP": "4"}))
    sizes = dw.engine_sizes(command, {"tp_size": 8, "dp_size": 2, "max_batch_size": 64}, "trtllm")
    assert (sizes.tensor_parallel, sizes.data_parallel, sizes.concurrency_cap) == ("4", 2, 64)
    vllm = dw.engine_sizes(command, {"max_batch_size": 64}, "vllm")  # not vLLM's key
    assert vllm.concurrency_cap is None


@pytest.mark.parametrize("args, mode", [
    (["--disaggregation-mode", "decode"], "decode"),
    (["--is-prefill-worker"], "prefill"),
    (["--enforce-eager"], None),
])
def test_disaggregation_mode(args, mode):
    assert dw.disaggregation_mode(dw.command_of(_component(args=args))) == mode


def test_worker_role_takes_the_engine_mode_only_for_a_plain_worker():
    assert dw.worker_role(_component(kind="worker"), "prefill") == "prefill"
    assert dw.worker_role(_component(kind="worker"), None) == "worker"
    encoder = _component(kind="encode")
    assert dw.worker_role(encoder, "prefill") == "encode"
    named = _component(kind="worker")
    named.kind_role = "decode"  # read from its name beside other workers
    assert dw.worker_role(named, None) == "decode"


def test_notes_name_padded_args_zero_replicas_and_a_placeholder_selector():
    parts = PartProblems("recipes/m/vllm/agg/deploy.yaml")
    comp = _component(args=["--tp", " --max-num-seqs", "8"], replicas=0, pod={"nodeSelector": "${SELECTOR}"})
    command = dw.command_of(comp)
    for note in (dw.note_padded_args, dw.note_scaled_to_zero, dw.note_placeholder_selector):
        note(comp, command, parts)
    assert [(p.field, p.scope) for p in parts.problems] == [
        ("spec.services.VllmWorker.args", "warning"), ("spec.services.VllmWorker.replicas", "warning"),
        ("spec.services.VllmWorker.extraPodSpec.nodeSelector", "warning")]
    assert "' --max-num-seqs' starts with whitespace" in parts.problems[0].reason
    quiet = PartProblems("f")
    plain = _component(args=["--tp", "2"], replicas=1, pod={"nodeSelector": {}})
    for note in (dw.note_padded_args, dw.note_scaled_to_zero, dw.note_placeholder_selector):
        note(plain, dw.command_of(plain), quiet)
    assert quiet.problems == []


def test_read_worker_builds_the_worker_from_its_fields():
    comp = _component(args=["--model", "org/M", "--tensor-parallel-size", "4", "--max-num-seqs", "96",
                            "--disaggregation-mode", "decode"],
                      pod={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"}})
    read = dw.read_worker(comp, "vllm", {}, PartProblems("f"))
    w = read.worker
    assert (w.role, w.card, w.card_label, w.tensor_parallel_size, w.max_concurrency.value) == (
        "decode", "h200", "NVIDIA-H200", 4, 96)
    assert (read.models.names, read.labels, read.split) == (["org/M"], ["NVIDIA-H200"], True)
    with pytest.raises(BadField, match="expected a whole number"):
        dw.read_worker(_component(args=["--tp", "four"]), "vllm", {}, PartProblems("f"))


# ---- dynamo_import: one manifest, one graph, one entry -------------------------------------------

def test_read_manifest_files_each_document_by_kind():
    docs = [{"kind": "ConfigMap", "data": {"a.yaml": 1}}, {"kind": "ConfigMap", "metadata": {"name": "cm"}},
            {"kind": "ResourceClaimTemplate", "metadata": {"name": "gpus"}}, {"kind": "ComputeDomain"},
            {"kind": ["odd"]}, "text", {"kind": "DynamoGraphDeployment", "spec": {}}]
    manifest = di.read_manifest("recipes/org-model/sglang/disagg/deploy.yaml", docs)
    assert manifest.config_maps == {"#0": {"a.yaml": "1"}, "cm": {}}
    assert list(manifest.claim_templates) == ["gpus"]
    assert manifest.graphs == [{"kind": "DynamoGraphDeployment", "spec": {}}]
    assert (manifest.folder, manifest.backend_dir, manifest.dirs) == ("org-model", "sglang",
                                                                      ("org-model", "sglang", "disagg"))
    assert di.read_manifest("recipes/org/model/vllm/agg/deploy.yaml", []).folder == "org/model"
    assert di.read_manifest("recipes/model/agg/deploy.yaml", []).folder == "model"  # no backend directory
    assert di.read_manifest("recipes/solo.yaml", []).folder == "solo"


def test_graph_backend_prefers_the_spec_then_the_directory_then_the_command():
    in_dir = di.read_manifest("recipes/m/trtllm/agg/deploy.yaml", [])
    assert di.graph_backend({"spec": {"backendFramework": "SGLang"}}, in_dir) == ("sglang", "SGLang")
    assert di.graph_backend({"spec": {}}, in_dir) == ("trtllm", "trtllm")
    bare = di.read_manifest("recipes/m/deploy.yaml", [])
    by_command = {"spec": {"services": {"W": {"componentType": "worker", "extraPodSpec": {"mainContainer": {
        "command": ["python3", "-m", "dynamo.tensorrt_llm"]}}}}}}
    assert di.graph_backend(by_command, bare) == ("trtllm", "tensorrt_llm")
    assert di.graph_backend({"spec": {"backendFramework": "onnx"}}, bare) == (None, "onnx")


def test_graph_workers_read_roles_from_names_only_beside_other_workers():
    def graph(*names: str) -> dict:
        return {"spec": {"services": {n: {"componentType": "worker"} for n in names} | {
            "Frontend": {"componentType": "frontend"}}}}
    assert [c.kind_role for c in di.graph_workers(graph("VllmPrefillWorker"), "")] == [None]
    pair = di.graph_workers(graph("VllmPrefillWorker", "VllmDecodeWorker"), "")
    assert [c.kind_role for c in pair] == ["prefill", "decode"]
    with pytest.raises(BadField, match="no worker component") as bad:
        di.graph_workers({"spec": {"services": {"Frontend": {"componentType": "frontend"}}}}, "(document 2)")
    assert bad.value.field == "(document 2)spec.components"


def test_is_disaggregated_by_split_engine_prefill_pool_or_name():
    agg = di.read_manifest("recipes/m/vllm/agg/deploy.yaml", [])
    assert not di.is_disaggregated(di.Workers(built=[_worker("decode")]), agg)
    assert di.is_disaggregated(di.Workers(built=[_worker("prefill"), _worker("decode")]), agg)
    assert di.is_disaggregated(di.Workers(built=[_worker("decode")], split=True), agg)
    assert di.is_disaggregated(di.Workers(), di.read_manifest("recipes/m/vllm/disagg-8gpu/deploy.yaml", []))
    assert di.is_disaggregated(di.Workers(), di.read_manifest("recipes/m/vllm/disagg_h200.yaml", []))


def test_serving_worker_is_decode_and_never_an_encoder():
    encode, prefill, decode = _worker("encode"), _worker("prefill"), _worker("decode")
    assert di.serving_worker([encode, prefill, decode]) is decode
    assert di.serving_worker([encode, prefill]) is prefill
    assert di.serving_worker([encode]) is encode


@pytest.mark.parametrize("main, workers, rel, expected", [
    (_worker(card="h200", label="NVIDIA-H200"), di.Workers(labels=["NVIDIA-H200"]), "recipes/m/vllm/agg/deploy.yaml",
     di.EntryCard("h200", "NVIDIA-H200", "node selector")),
    (_worker(card="b200", label="NVIDIA B200"), di.Workers(claimed=["NVIDIA B200"]), "recipes/m/vllm/agg/deploy.yaml",
     di.EntryCard("b200", "NVIDIA B200", "resource claim")),
    (_worker("encode"), di.Workers(labels=["NVIDIA-GB200"]), "recipes/m/vllm/agg/deploy.yaml",
     di.EntryCard("gb200", "NVIDIA-GB200", "node selector")),  # another worker's label
    (_worker(), di.Workers(), "recipes/m/vllm/agg-h100/deploy.yaml", di.EntryCard("h100", None, "directory name")),
    (_worker(), di.Workers(), "recipes/m/vllm/agg/deploy-aws-p5en.48xlarge.yaml",
     di.EntryCard("h200", None, "directory name")),  # a cloud instance type names its card
    (_worker(), di.Workers(families=["blackwell"]), "recipes/m/vllm/agg/deploy.yaml",
     di.EntryCard(None, None, "node selector", "blackwell")),
    (_worker(), di.Workers(), "recipes/m/vllm/agg/deploy_hopper_16gpu.yaml",
     di.EntryCard(None, None, "directory name", "hopper")),
    (_worker(), di.Workers(labels=["NVIDIA-Mystery"]), "recipes/m/vllm/agg/deploy.yaml",
     di.EntryCard(None, "NVIDIA-Mystery", "node selector")),
    (_worker(), di.Workers(), "recipes/m/vllm/agg/deploy.yaml", di.EntryCard(None, None, None)),
])
def test_entry_card_by_source(main, workers, rel, expected):
    assert di.entry_card(main, workers, di.read_manifest(rel, [])) == expected


def test_entry_name_is_the_served_name_else_the_first_model_else_the_folder():
    served = di.Workers(model_ids=["nvidia/M-NVFP4", "org/M"], source="--model",
                        served=("org/M", "--served-model-name"))
    assert di.entry_name(served, "m") == ("org/M", "--served-model-name", "nvidia/M-NVFP4")
    loaded = di.Workers(model_ids=["org/M"], source="env MODEL")
    assert di.entry_name(loaded, "m") == ("org/M", "env MODEL", "org/M")
    assert di.entry_name(di.Workers(), "m") == ("m", "recipe folder", None)

"""A disaggregated traffic plan, from AIConfigurator's own answer to the rendered graph. The answer is one real
`aiconfigurator cli recommend` run (tests/perf/fixtures/qwen3-8b-h200-recommend, see its SOURCE.md), parsed
by the adapter's own row parser; the tool's own DynamoGraphDeployment for its best disaggregated row is the
reference the rendering is compared with. Pure: no AIConfigurator, Temporal or database here."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from tests.dynamo.builders import validate_dgd
from tests.upstream import snapshot_config, snapshot_meta
from wingsmith.adapters.perf.aiconfigurator import configuration_from_row
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.dynamo import render_dgd
from wingsmith.domain.dynamo.engine_args import flag_value
from wingsmith.domain.perf.estimates import MODES, Pool, Source
from wingsmith.domain.perf.traffic import CardPlan, TrafficTarget, plan_card
from wingsmith.domain.placement import place
from wingsmith.domain.placement.models import ClusterInfo, ClusterInventory, NodePool
from wingsmith.domain.recipes import evidence_for
from wingsmith.domain.target_plan import choose_card
from wingsmith.domain.workloads import (
    ApprovedArtifact,
    WorkloadRequest,
    plan_workload,
    replica_set_nodes,
    sized_by_target,
    with_engine_args,
)

FIXTURE = Path(__file__).parent / "fixtures" / "qwen3-8b-h200-recommend"
MODEL, CARD, SHA = "Qwen/Qwen3-8B", "h200", "c" * 40
# What the run asked (SOURCE.md): the inputs, not the answers; the answers are read from the tool's files.
TARGET = TrafficTarget(requests_per_second=100, isl=8000, osl=200, ttft_ms=1000, tpot_ms=6)


def _rows(mode: str) -> list[dict[str, str]]:
    with (FIXTURE / mode / "best_config_topn.csv").open() as f:
        return list(csv.DictReader(f))


def _tool_services() -> dict[str, dict]:
    return yaml.safe_load((FIXTURE / "disagg" / "top1" / "k8s_deploy.yaml").read_text())["spec"]["services"]


def _card_plan() -> CardPlan:
    first = _rows("disagg")[0]
    source = Source(version="0.12.0", database=f"{first['(p)system']} {first['(p)backend']} {first['(p)version']}")
    candidates = [configuration_from_row(mode, row, None) for mode in MODES for row in _rows(mode)]
    return plan_card(CARD, TARGET, candidates, source)


def _plan():
    catalog = load_catalog()
    artifact = ApprovedArtifact(
        id=f"{MODEL}@{SHA}", repo_id=MODEL, sha=SHA, state="approved", draft_version=1,
        evidence=evidence_for(catalog.find(MODEL), catalog).model_dump(mode="json"), config=snapshot_config(MODEL),
        weight_bytes=snapshot_meta(MODEL)["total_size_bytes"])
    chosen = choose_card([_card_plan()]).chosen
    assert chosen is not None
    request = WorkloadRequest(artifact_id=artifact.id, hardware=CARD, target=TARGET, name="qwen3-8b-target")
    plan = plan_workload(sized_by_target(request, chosen), artifact, catalog,
                         image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0", namespace="default",
                         hf_token_secret="hf-token")
    return with_engine_args(plan, chosen), chosen


def _int(args: list[str], flag: str) -> int:
    value = flag_value(args, (flag,))
    assert value is not None, f"{flag} missing from {args}"
    return int(value)


def test_the_plane_chooses_the_mode_and_counts_the_tool_chose():
    plan = _card_plan()
    tool_best = {mode: _rows(mode)[0] for mode in MODES}  # the tool ranks each mode's rows by total GPUs
    winner = min(MODES, key=lambda mode: int(tool_best[mode]["total_gpus_needed"]))
    assert plan.meets_target and plan.configuration is not None and plan.configuration.mode == winner == "disagg"
    assert plan.replicas == int(tool_best["disagg"]["replicas_needed"])
    assert plan.gpus == int(tool_best["disagg"]["total_gpus_needed"])
    (other,) = plan.alternatives
    assert other.configuration is not None and other.configuration.mode == "agg" and other.meets_target
    assert (other.replicas, other.gpus) == (int(tool_best["agg"]["replicas_needed"]),
                                            int(tool_best["agg"]["total_gpus_needed"]))


def test_the_dry_run_candidates_name_both_modes_and_why_the_other_lost():
    choice = choose_card([_card_plan()])
    assert choice.chosen is not None and choice.chosen.configuration is not None
    by_mode = {c.mode: c for c in choice.candidates}
    assert set(by_mode) == {"agg", "disagg"}
    assert by_mode["disagg"].why_not is None and choice.chosen.configuration.mode == "disagg"
    agg = by_mode["agg"]
    assert agg.why_not == f"more GPUs: {agg.plan.gpus} against {choice.chosen.gpus} on {CARD} (disagg)"


def test_with_prices_an_aggregated_plan_on_a_cheaper_card_beats_a_disaggregated_one():
    disagg = _card_plan()
    # The same aggregated rows offered on another card, priced so that its larger plan costs less per hour.
    agg_elsewhere = plan_card("b200", TARGET, [configuration_from_row("agg", row, None) for row in _rows("agg")])
    prices = {CARD: 10.0, "b200": 10.0 * disagg.gpus / agg_elsewhere.gpus * 0.9}
    choice = choose_card([disagg, agg_elsewhere], prices)
    assert choice.chosen is not None and choice.chosen.card == "b200"
    why = {(c.plan.card, c.mode): c.why_not or "" for c in choice.candidates}
    assert why[(CARD, "disagg")].startswith("dearer") and why[(CARD, "agg")].startswith("dearer")


def test_a_disaggregated_plan_that_cannot_be_rendered_gives_way_to_the_card_s_aggregated_one():
    plan = _card_plan()
    assert plan.configuration is not None
    prefill, decode = plan.configuration.workers
    # A decode worker of 12 GPUs on 8-GPU nodes: neither within a node nor whole nodes.
    odd = decode.model_copy(update={"gpus_per_worker": 12, "parallelism": decode.parallelism.model_copy(
        update={"tp": 12})})
    broken = plan.model_copy(update={"configuration": plan.configuration.model_copy(
        update={"workers": [prefill, odd]})})
    choice = choose_card([broken])
    assert choice.chosen is not None and choice.chosen.configuration is not None
    assert choice.chosen.configuration.mode == "agg"
    disagg = next(c for c in choice.candidates if c.mode == "disagg")
    assert "12 GPUs" in (disagg.why_not or "") and "whole" in (disagg.why_not or "")


def test_the_workload_plan_has_a_prefill_and_a_decode_pool_with_the_tool_s_shapes():
    plan, chosen = _plan()
    row = _rows("disagg")[0]
    assert plan.layout == "pd_cluster" and plan.prefill is not None and plan.hardware == CARD
    assert plan.replicas == chosen.replicas == int(row["replicas_needed"])
    for side, pool in (("p", plan.prefill), ("d", plan.worker)):
        assert pool.workers_per_replica == int(row[f"({side})workers"])
        assert pool.gpus_per_replica == int(row[f"({side})tp"]) * int(row[f"({side})pp"]) * int(row[f"({side})dp"])
        assert _int(pool.args, "--tensor-parallel-size") == int(row[f"({side})tp"])
        assert _int(pool.args, "--max-num-seqs") == int(row[f"({side})bs"])
    assert plan.max_num_seqs == int(row["(d)bs"]) and plan.max_num_seqs_source.startswith("AIConfigurator 0.")
    # Placement reserves one replica's prefill and decode GPUs together.
    assert plan.gpus_per_replica == plan.placement.gpus_per_replica == int(row["num_total_gpus"])
    assert plan.placement.replicas == plan.replicas and plan.placement.nodes_per_replica == 1
    assert plan.fit["checked"] and plan.fit["fits"] and plan.fit["sized_pool"] == "decode"


def test_the_rendered_graph_has_the_tool_s_workers_and_passes_the_crd_schema():
    plan, chosen = _plan()
    dgd = render_dgd(plan.rollout_spec("sim-east", plan.replicas))
    validate_dgd(dgd)
    ours = {c["type"]: c for c in dgd["spec"]["components"]}
    assert set(ours) == {"frontend", "prefill", "decode"}
    tool = {s["subComponentType"]: s for s in _tool_services().values() if s.get("subComponentType")}
    for role in ("prefill", "decode"):
        mine, theirs = ours[role], tool[role]
        args = mine["podTemplate"]["spec"]["containers"][0]["args"]
        tool_args = theirs["extraPodSpec"]["mainContainer"]["args"]
        assert mine["replicas"] == theirs["replicas"]
        assert (mine["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
                == theirs["resources"]["limits"]["gpu"])
        for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size",
                     "--disaggregation-mode", "--kv-transfer-config"):
            assert flag_value(args, (flag,)) == flag_value(tool_args, (flag,)), flag
        # The token budget is the tool's own rule; the batch is the tool's figure for the prefill side, and
        # on the decode side the batch size the figures are for (the tool's generator allows at least 512).
        assert flag_value(args, ("--max-num-batched-tokens",)) == flag_value(tool_args, ("--max-num-batched-tokens",))
    prefill_args = ours["prefill"]["podTemplate"]["spec"]["containers"][0]["args"]
    tool_prefill = tool["prefill"]["extraPodSpec"]["mainContainer"]["args"]
    assert flag_value(prefill_args, ("--max-num-seqs",)) == flag_value(tool_prefill, ("--max-num-seqs",))
    decode_args = ours["decode"]["podTemplate"]["spec"]["containers"][0]["args"]
    assert _int(decode_args, "--max-num-seqs") == plan.max_num_seqs == int(_rows("disagg")[0]["(d)bs"])
    notes = dgd["metadata"]["annotations"]
    assert notes["wingsmith.dev/layout"] == "pd_cluster"
    assert notes["wingsmith.dev/max-num-seqs"] == str(plan.max_num_seqs)


def test_a_cluster_s_share_of_replicas_keeps_the_prefill_to_decode_ratio():
    plan, _ = _plan()
    assert plan.prefill is not None
    for share in (1, 3, plan.replicas):
        components = {c["type"]: c for c in render_dgd(plan.rollout_spec("sim-west", share))["spec"]["components"]}
        assert components["prefill"]["replicas"] == share * plan.prefill.workers_per_replica
        assert components["decode"]["replicas"] == share * plan.worker.workers_per_replica


def test_placement_reserves_each_replica_s_prefill_and_decode_gpus():
    plan, _ = _plan()
    nodes = 4
    inventory = ClusterInventory(cluster="four-nodes", source="manual",
                                 pools=[NodePool(hardware_id=CARD, gpus_per_node=8, free_gpus=8, nodes=nodes)])
    decision = place(plan.placement, [inventory], [ClusterInfo(name="four-nodes")])
    held = decision.replicas.get("four-nodes", 0)
    assert held == min(plan.replicas, nodes * (8 // plan.gpus_per_replica))
    assert decision.unplaced == plan.replicas - held


@pytest.mark.parametrize(("workers", "node", "reserved"), [
    ([1, 1, 2], 8, (4, 1)),             # the fixture's replica: one node, exactly its GPUs
    ([1, 1, 1, 1, 4], 8, (8, 1)),       # fills one node
    ([4, 4, 4, 8], 8, (8, 3)),          # 8 | 4 4 | 4: three nodes, each reserving a full node
    ([16, 8], 8, (8, 3)),               # whole-node workers
    ([2, 2, 2], 4, (4, 2)),             # GB200's 4-GPU nodes: 2 2 | 2
    ([8, 2], 8, (8, 2)),
    ([5, 5], 8, (5, 2)),                # two nodes, each reserving what its worker uses
    ([6, 4, 2], 8, (8, 2)),             # 6 2 | 4: the fuller node's share on both
])
def test_a_replica_s_workers_are_packed_onto_nodes(workers, node, reserved):
    gpus_per_node, nodes = replica_set_nodes(workers, node)
    assert (gpus_per_node, nodes) == reserved
    assert gpus_per_node * nodes >= sum(workers)  # never less than the workers use


def test_an_aggregated_plan_keeps_one_worker_per_replica_and_the_tool_s_arguments():
    catalog = load_catalog()
    plan, _ = _plan()
    agg = next(p for p in (_card_plan(), *_card_plan().alternatives)
               if p.configuration is not None and p.configuration.mode == "agg")
    assert agg.configuration is not None
    artifact = ApprovedArtifact(
        id=f"{MODEL}@{SHA}", repo_id=MODEL, sha=SHA, state="approved", draft_version=1,
        evidence=evidence_for(catalog.find(MODEL), catalog).model_dump(mode="json"), config=snapshot_config(MODEL),
        weight_bytes=snapshot_meta(MODEL)["total_size_bytes"])
    request = WorkloadRequest(artifact_id=artifact.id, hardware=CARD, target=TARGET, name="qwen3-8b-agg")
    out = with_engine_args(plan_workload(sized_by_target(request, agg), artifact, catalog, image=plan.image,
                                         namespace="default", hf_token_secret=None), agg)
    assert out.layout == "single_node_tp" and out.prefill is None and out.worker.workers_per_replica == 1
    dgd = render_dgd(out.rollout_spec("sim-east", out.replicas))
    validate_dgd(dgd)
    worker = next(c for c in dgd["spec"]["components"] if c["type"] == "worker")
    args = worker["podTemplate"]["spec"]["containers"][0]["args"]
    tool = next(s for s in yaml.safe_load((FIXTURE / "agg" / "top1" / "k8s_deploy.yaml").read_text())["spec"][
        "services"].values() if s["componentType"] == "worker")
    tool_args = tool["extraPodSpec"]["mainContainer"]["args"]
    assert worker["replicas"] == tool["replicas"] == out.replicas
    for flag in ("--tensor-parallel-size", "--max-num-batched-tokens"):
        assert flag_value(args, (flag,)) == flag_value(tool_args, (flag,)), flag
    pool: Pool = agg.configuration.workers[0]
    assert _int(args, "--max-num-seqs") == pool.batch_size == out.max_num_seqs


def test_a_decode_worker_larger_than_a_node_spans_whole_nodes():
    # Kimi-K3 on H200 in the tool's own row format (the real row's columns, with 2 prefill workers of TP8 and
    # one decode worker of TP16): the decode worker needs two nodes, the replica four.
    row = {**_rows("disagg")[0], "model": "moonshotai/Kimi-K3", "(p)tp": "8", "(p)workers": "2", "(d)tp": "16",
           "(d)workers": "1", "(d)bs": "32", "num_total_gpus": "32"}
    conf = configuration_from_row("disagg", row, None)
    chosen = plan_card(CARD, TARGET, [conf])
    assert chosen.meets_target
    catalog = load_catalog()
    kimi = "moonshotai/Kimi-K3"
    artifact = ApprovedArtifact(
        id=f"{kimi}@{SHA}", repo_id=kimi, sha=SHA, state="approved", draft_version=1,
        evidence=evidence_for(catalog.find(kimi), catalog).model_dump(mode="json"), config=snapshot_config(kimi),
        weight_bytes=snapshot_meta(kimi)["total_size_bytes"])
    request = WorkloadRequest(artifact_id=artifact.id, hardware=CARD, target=TARGET, name="kimi-target")
    sized = sized_by_target(request, chosen)
    assert (sized.layout, sized.gpus) == ("multi_node_tp", 16)
    plan = with_engine_args(plan_workload(sized, artifact, catalog, image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0",
                                          namespace="default", hf_token_secret=None), chosen)
    assert plan.prefill is not None and plan.fit["checked"] and plan.fit["gpus"] == 16
    assert (plan.prefill.nodes, plan.prefill.gpus_per_node, plan.prefill.workers_per_replica) == (1, 8, 2)
    assert (plan.worker.nodes, plan.worker.gpus_per_node, plan.worker.workers_per_replica) == (2, 8, 1)
    assert (plan.placement.gpus_per_node, plan.placement.nodes_per_replica) == (8, 4)
    dgd = render_dgd(plan.rollout_spec("sim-east", 2))
    validate_dgd(dgd)
    components = {c["type"]: c for c in dgd["spec"]["components"]}
    assert components["prefill"]["replicas"] == 4 and "multinode" not in components["prefill"]
    assert components["decode"]["replicas"] == 2 and components["decode"]["multinode"] == {"nodeCount": 2}
    decode_args = components["decode"]["podTemplate"]["spec"]["containers"][0]["args"]
    assert _int(decode_args, "--tensor-parallel-size") == 16 and "--nnodes" not in decode_args

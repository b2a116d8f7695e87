"""Issue 48 item 6: per card, the layout NVIDIA's Dynamo recipe deploys (workers, TP/DP, counts) beside
AIConfigurator's recommendation and the plane's choice, each with its backend named, on the draft and the model
page. The Dynamo side is read from a manifest in upstream's own DGD format."""

from __future__ import annotations

from html import unescape

from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.draft_performance import PerformanceRow
from wingsmith.domain.recipes import evidence_for
from wingsmith.domain.recipes.dynamo_import import import_dynamo
from wingsmith.domain.recipes.layouts_compared import ChosenLayout, layouts_compared

# NVIDIA's aggregated recipe for the model on H200: one worker, TP 2 (AIConfigurator recommends 4 × TP2).
_AGG_TP2 = """
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: qwen3-32b-agg}
spec:
  backendFramework: trtllm
  services:
    Frontend: {componentType: frontend, replicas: 1}
    TRTLLMWorker:
      componentType: worker
      replicas: 1
      resources: {limits: {gpu: "2"}}
      extraPodSpec:
        nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.3.0
          command: [python3, -m, dynamo.trtllm]
          args: [--model-path, Qwen/Qwen3-32B, --tensor-parallel-size, "2", --max-batch-size, "128"]
"""


def _rows() -> list[PerformanceRow]:
    return [PerformanceRow(card="h200", layout="single_node_tp", mode="agg", backend="vllm", isl=4000, osl=1000,
                           tokens_per_second_per_gpu=927.0, parallelism="TP2", replicas=4, gpus_per_replica=2,
                           source="AIConfigurator 0.12.0"),
            PerformanceRow(card="h200", layout="single_node_tp", mode="agg", backend="vllm", isl=4000, osl=1000,
                           tokens_per_second_per_gpu=455.0, parallelism="TP8", replicas=1, gpus_per_replica=8)]


def _catalog_with_entry():
    catalog = load_catalog()
    entries, problems, _ = import_dynamo({"recipes/qwen3-32b/trtllm/agg/deploy.yaml": _AGG_TP2})
    assert entries and not [p for p in problems if p.scope != "warning"]
    return catalog.model_copy(update={"dynamo": entries})


def test_each_card_shows_the_deployed_recommended_and_chosen_layouts_with_their_backends():
    catalog = _catalog_with_entry()
    evidence = evidence_for(catalog.find("Qwen/Qwen3-32B"), catalog)
    chosen = {"h200": ChosenLayout(layout="single_node_tp", gpus=1, nodes=1, reason="the smallest shape")}
    h200 = next(c for c in layouts_compared("Qwen/Qwen3-32B", evidence, catalog, _rows(), chosen) if c.card == "h200")
    assert [(d.backend, d.mode, d.workers) for d in h200.deployed] == [
        ("trtllm", "aggregated", ["1 × aggregated worker: TP 2, 2 GPU(s)"])]
    assert [(r.backend, r.parallelism, r.replicas, r.tokens_per_second_per_gpu) for r in h200.recommended] == [
        ("vllm", "TP2", 4, 927.0)]
    assert h200.chosen is not None and (h200.chosen.backend, h200.chosen.gpus) == ("vllm", 1)


def test_the_draft_table_names_every_backend():
    from console.rendering import templates

    catalog = _catalog_with_entry()
    evidence = evidence_for(catalog.find("Qwen/Qwen3-32B"), catalog)
    compared = layouts_compared("Qwen/Qwen3-32B", evidence, catalog, _rows())
    html = unescape(templates.env.get_template("_layouts_compared.html").module.layouts_compared_table(compared))
    row = html[html.index('data-card="h200"'):]
    row = row[:row.index("</tr>")]
    assert "<strong>trtllm</strong>, aggregated: 1 × aggregated worker: TP 2, 2 GPU(s)" in row
    assert "<strong>vllm</strong>, agg single_node_tp: TP2, 4 replica(s) of 2 GPU(s), 927 tokens/s/GPU" in row
    assert "<strong>vllm</strong>, single_node_tp:" in row


async def test_the_model_page_shows_the_layouts_side_by_side(anon):
    html = unescape((await anon.get("/console/models/Qwen/Qwen3-32B")).text)
    assert 'id="layouts-side-by-side"' in html
    h100 = html[html.index('<tr data-card="h100">'):]
    h100 = h100[:h100.index("</tr>")]
    assert "<strong>vllm</strong>, disaggregated: 1 × decode worker: TP 4, 4 GPU(s)" in h100
    assert "<strong>vllm</strong>, single_node_tp:" in h100 and "no estimate for this card" in h100

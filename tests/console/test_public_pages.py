"""The public model pages: readable without a token, built from the recipe catalog alone."""

from __future__ import annotations

import math
import re
from html import unescape

import yaml

from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.recipes import InvalidChoice, max_num_seqs_default, serve_command
from wingsmith.domain.workloads import max_num_seqs_for

KIMI_LAYOUTS = ["single_node_tp", "multi_node_tp", "multi_node_tep", "multi_node_tp_pp", "multi_node_dep",
                "pd_cluster", "multi_node_tp_dp"]


def rows(html: str, kind: str) -> dict[str, str]:
    """`data-<kind>` table rows by name → their text, tags stripped."""
    out = {}
    for m in re.finditer(rf'<tr data-{kind}="([^"]+)"[^>]*>(.*?)</tr>', html, re.S):
        out[m.group(1)] = " ".join(unescape(re.sub(r"<[^>]+>", " ", m.group(2))).split())
    return out


def _builds(recipe, card: str, layout: str, catalog) -> bool:
    try:
        serve_command(recipe, "default", card, layout, [], catalog=catalog)
    except InvalidChoice:
        return False
    return True


def commands(html: str) -> list[str]:
    return [unescape(c) for c in re.findall(r'<pre class="command"[^>]*>(.*?)</pre>', html, re.S)]


async def test_model_index_lists_every_recipe(anon):
    r = await anon.get("/console/models")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    for recipe in load_catalog().recipes.values():
        assert f'href="/console/models/{recipe.path}"' in r.text


async def test_kimi_page_reads_without_a_token(anon):
    r = await anon.get("/console/models/moonshotai/Kimi-K3")
    assert r.status_code == 200, r.text
    html = r.text
    catalog = load_catalog()

    layouts = rows(html, "layout")
    assert list(layouts) == KIMI_LAYOUTS
    assert "default" in layouts["single_node_tp"] and "default" not in layouts["multi_node_tp"]
    assert "only on gb200, gb300, h200" in layouts["multi_node_tp_dp"]
    assert "h200 : the recipe marks multi_node_dep unsupported on h200" in layouts["multi_node_dep"]
    # Cards refused for the same reason share one line.
    assert "b200, b300, h100, mi355x : multi_node_tp_dp is not a compatible layout" in layouts["multi_node_tp_dp"]

    hardware = rows(html, "hardware")
    assert "GB200 NVL4" in hardware["gb200"] and " 4 " in f" {hardware['gb200']} "
    assert "tested by vLLM" in hardware["h200"] and "yes" in hardware["h200"]
    assert "not stated by the recipe" in hardware["h100"]
    assert "only NVIDIA GPUs can be placed" in hardware["mi355x"]

    variants = rows(html, "variant")
    assert "1680 GB" in variants["default"] and "an estimate" in variants["default"]
    assert "1650 GB" in variants["nvfp4"] and "RedHatAI/Kimi-K3-NVFP4" in variants["nvfp4"]

    features = rows(html, "feature")
    assert "on" in features["reasoning"].split() and "--reasoning-parser kimi_k3" in features["reasoning"]
    assert "opt-in" in features["spec_decoding"] and "on amd the flags are" in features["spec_decoding"]

    # The default command is the recipe's default layout on its default card, as serve_command builds it.
    kimi = catalog.find("moonshotai/Kimi-K3")
    expected = serve_command(kimi, "default", "b300", "single_node_tp", [], catalog=catalog)
    shown = commands(html)
    serve = next(c for c in shown if c.lstrip().startswith(("vllm serve", *[f"{k}=" for k in expected.env])))
    assert "vllm serve moonshotai/Kimi-K3" in serve
    for flag in expected.args:
        if flag.startswith("--"):
            assert flag in serve

    seqs = rows(html, "card")
    gb200 = max_num_seqs_default("moonshotai/Kimi-K3", "gb200", catalog)
    assert gb200.value == 256 and "256" in seqs["gb200"] and gb200.source_path in seqs["gb200"]
    assert "mi355x" not in seqs
    # Issue 34: the page and the workload agree. On H200 the recipe's own Hopper command sets the value,
    # and the planner's plan for an H200 workload runs with exactly it.
    for card, row in seqs.items():
        layout = next(lay for lay in ("single_node_tp", "multi_node_tp")
                      if _builds(kimi, card, lay, catalog))
        command = serve_command(kimi, "default", card, layout, [], catalog=catalog)
        applied, _ = max_num_seqs_for(command, "moonshotai/Kimi-K3", card, catalog)
        assert (str(applied) if applied is not None else "engine's default") in row, (card, row)
    assert " 5 " in f" {seqs['h200']} "
    assert catalog.vllm_source.commit in html and catalog.dynamo_source.commit in html

    # The four steps, with calls against this plane.
    for title in ("1. Resolve", "2. Draft", "3. Workload", "4. Endpoint"):
        assert title in html
    assert any('"http://plane/v1/artifacts/resolve?source=hf:moonshotai/Kimi-K3"' in c for c in shown)
    assert any("-d '{\"source\": \"hf:moonshotai/Kimi-K3\"}'" in c and "/v1/artifacts\"" in c for c in shown)


async def test_a_chosen_layout_and_hardware_render_their_command(anon):
    r = await anon.get("/console/models/moonshotai/Kimi-K3", params={"hardware": "gb200", "layout": "multi_node_tp"})
    assert r.status_code == 200
    shown = [c for c in commands(r.text) if "vllm serve" in c]
    # One command per node, on as many 4-GPU trays as hold the default variant's floor (never below it).
    catalog = load_catalog()
    floor = catalog.recipes["moonshotai/Kimi-K3"].variants["default"].vram_minimum_gb
    tray = catalog.hardware["gb200"]
    assert len(shown) == max(2, math.ceil(floor / tray.vram_gb))
    assert all(f"--node-rank {rank}" in cmd for rank, cmd in enumerate(shown))
    assert "--master-addr $HEAD_NODE_IP" in shown[1], "the head address stays a shell variable"
    assert 'value="gb200" selected' in r.text and "<option selected>multi_node_tp</option>" in r.text

    pd = await anon.get("/console/models/moonshotai/Kimi-K3", params={"hardware": "h200", "layout": "pd_cluster"})
    roles = re.findall(r'<pre class="command" data-role="([a-z]+)"', pd.text)
    assert "prefill" in roles and "decode" in roles


async def test_a_choice_the_recipe_rules_out_is_explained_in_the_page(anon):
    r = await anon.get("/console/models/moonshotai/Kimi-K3", params={"hardware": "h200", "layout": "multi_node_dep"})
    assert r.status_code == 200
    assert "This choice does not work: the recipe marks multi_node_dep unsupported on h200" in unescape(r.text)
    bad = await anon.get("/console/models/moonshotai/Kimi-K3", params={"hardware": "tpu9", "layout": "single_node_tp"})
    assert bad.status_code == 200 and "This choice does not work" in bad.text and "tpu9" in bad.text


async def test_unknown_model_is_a_404_page(anon):
    r = await anon.get("/console/models/nobody/NoSuchModel")
    assert r.status_code == 404 and "text/html" in r.headers["content-type"]
    assert "There is no recipe for nobody/NoSuchModel" in r.text


async def test_stylesheet_is_served(anon):
    r = await anon.get("/console/static/console.css")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css") and "pre.command" in r.text


def test_journey_calls_are_well_formed_shell_with_bodies_the_api_accepts():
    import json
    import shlex
    import subprocess

    from api.services.artifacts import RegisterRequest
    from console.journey import journey_steps, workload_body
    from wingsmith.domain.review import ReviewDecision
    from wingsmith.domain.workloads import WorkloadRequest

    steps = journey_steps("http://plane:8000/", "moonshotai/Kimi-K3", hardware="gb200", gpus=8, layout="multi_node_tp")
    assert [s.title.split(".")[0] for s in steps] == ["1", "2", "3", "4"]
    for step in steps:
        for call in step.calls:
            syntax = subprocess.run(["bash", "-n", "-c", call], capture_output=True, text=True)
            assert syntax.returncode == 0, f"{call}\n{syntax.stderr}"
            assert "http://plane:8000/v1/" in call and "//v1" not in call

    def body_of(call: str) -> dict:
        # What the shell passes to curl -d, with $SHA expanded as bash would.
        words = shlex.split(call.replace("\\\n", " ").replace('"$SHA"', "0" * 40).replace("$SHA", "0" * 40))
        return json.loads(words[words.index("-d") + 1])

    register, _, review = steps[1].calls
    assert RegisterRequest(**body_of(register)).source == "hf:moonshotai/Kimi-K3"
    assert ReviewDecision(**body_of(review)).decision == "approve"
    workload = WorkloadRequest(**body_of(steps[2].calls[0]))
    assert workload.artifact_id == "moonshotai/Kimi-K3@" + "0" * 40
    assert (workload.hardware, workload.layout) == ("gb200", "multi_node_tp")
    body = workload_body("Qwen/Qwen3.5-397B-A17B", hardware="h200", layout="single_node_tp")
    assert body["name"] == "qwen3-5-397b-a17b"


def test_a_floor_warning_is_highlighted_on_the_draft():
    """Kimi-K3's own floors only inform (upstream marks its figure an estimate), so the warning is
    checked here: the plane's sizing of the real config with weights a third over the published floor."""
    from console.rendering import templates
    from console.views import variant_rows
    from tests.upstream import snapshot_config
    from wingsmith.adapters.recipes.files import load_catalog
    from wingsmith.domain.drafts import VariantSizing
    from wingsmith.domain.recipes import evidence_for
    from wingsmith.domain.sizing import size_model

    catalog = load_catalog()
    evidence = evidence_for(catalog.find("moonshotai/Kimi-K3"), catalog)
    config = snapshot_config("moonshotai/Kimi-K3")
    heavy = int(1650e9 / 1.2 * 1.34)  # nvfp4's published floor is 1650 GB and not an estimate
    report = size_model(config, heavy, "test", variant="nvfp4", published_floor_gb=1650, hardware="b300",
                        layout="multi_node_tp", gpus=16)
    assert report.floor.level == "warning"
    rows = variant_rows(evidence, [VariantSizing(variant="nvfp4", checkpoint="RedHatAI/Kimi-K3-NVFP4", report=report)])
    assert rows[0].warning and rows[0].published_gb == 1650 and rows[0].ours_gb == report.floor.ours_gb

    html = templates.env.get_template("_evidence.html").module.variants_table(rows, True)
    assert 'class="warn-row"' in html and "differs by a quarter or more" in html
    calm = variant_rows(evidence, [VariantSizing(variant="nvfp4", checkpoint="RedHatAI/Kimi-K3-NVFP4",
                                                 report=size_model(config, int(1650e9 / 1.2), "test", variant="nvfp4",
                                                                   published_floor_gb=1650, hardware="b300",
                                                                   layout="multi_node_tp", gpus=16))])
    assert not calm[0].warning
    assert "differs by a quarter" not in templates.env.get_template("_evidence.html").module.variants_table(calm, True)


async def test_every_model_in_the_catalog_has_its_model_page(anon):
    """Issue 35: every recipe of the shipped snapshot has a page, which lists each of its NVIDIA Dynamo
    entries and the facts the recipe carries beside its command (install, DCP, offloading, omni tasks)."""
    from wingsmith.domain.recipes import dynamo_entries, evidence_for

    catalog = load_catalog()
    for recipe in catalog.recipes.values():
        r = await anon.get(f"/console/models/{recipe.path}")
        assert r.status_code == 200, (recipe.path, r.text[:300])
        html = r.text
        assert recipe.model_id in html and "Traceback" not in html
        for entry in dynamo_entries(recipe.model_id, catalog):
            assert f'data-entry="{entry.source_path}"' in html, (recipe.path, entry.source_path)
        evidence = evidence_for(recipe, catalog)
        facts = rows(html, "fact")
        assert ("nightly" in facts["nightly"]) is evidence.nightly_required, recipe.path
        if evidence.supports_dcp:
            assert "known to work" in facts["dcp"], recipe.path
        for backend in evidence.kv_offload_support:
            assert f'data-offload="{backend}"' in html, recipe.path
        for task in evidence.omni_tasks:
            assert f'data-task="{task.id}"' in html, recipe.path
        for name in evidence.install:
            assert f'data-install="{name}"' in html, recipe.path


async def test_kimi_k3_page_lists_every_kimi_k3_dynamo_entry_with_its_workers(anon):
    catalog = load_catalog()
    html = (await anon.get("/console/models/moonshotai/Kimi-K3")).text
    entries = [e for e in catalog.dynamo if e.source_path.startswith("recipes/kimi-k3/")]
    assert entries and all(f'data-entry="{e.source_path}"' in html for e in entries)
    shown = rows(html, "entry")
    for e in entries:
        roles = {w.role for w in e.workers}
        # An aggregated graph's one worker is shown as the aggregated worker, never as "decode".
        assert roles == ({"aggregated"} if e.mode == "aggregated" else {"prefill", "decode"}), e.source_path
        assert all(f"{role}:" in shown[e.source_path] for role in roles)
        assert e.model_name in shown[e.source_path]


async def test_kimi_k3_page_lists_exactly_the_snapshots_kimi_k3_graphs(anon):
    """The page's entries are the snapshot's own Kimi-K3 DynamoGraphDeployment files, read here without
    the importer: a graph the catalog lost, or one it put on the wrong page, shows."""
    from tests.upstream import require_upstream

    dynamo = require_upstream("dynamo")
    folder = dynamo / "recipes" / "kimi-k3"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    graphs = {p.relative_to(dynamo).as_posix() for p in folder.rglob("*.yaml")
              if any(isinstance(d, dict) and d.get("kind") == "DynamoGraphDeployment"
                     for d in yaml.load_all(p.read_text(), Loader=loader))}
    assert len(graphs) >= 4  # agg and disagg on GB200 and GB300 in this snapshot
    html = (await anon.get("/console/models/moonshotai/Kimi-K3")).text
    assert set(re.findall(r'data-entry="([^"]+)"', html)) == graphs

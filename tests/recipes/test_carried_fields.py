"""Fields upstream sets beside the serve command (issue 35 item 4) reach the evidence, and a field the
importer does not know is said once per file, never dropped unseen. Dynamo entries keep the name they
serve and the checkpoint they load (item 3). On the project's fixtures in upstream's format."""

from __future__ import annotations

import pytest
import yaml

from tests.recipes.conftest import FIXTURES
from wingsmith.adapters.recipes.files import build_catalog, load_catalog
from wingsmith.domain.recipes import evidence_for
from wingsmith.domain.recipes.known_fields import unknown_fields


@pytest.fixture
def built_fixtures(fixture_trees):
    return build_catalog(*fixture_trees)


def _source(name: str) -> dict:
    return yaml.safe_load((FIXTURES / "vllm" / "models" / "fixture-lab" / f"{name}.yaml").read_text())


def test_dcp_offload_nightly_autotune_install_and_dependencies_reach_the_evidence(built_fixtures):
    catalog, _ = built_fixtures
    doc = _source("Carried-Fields-30B")
    evidence = evidence_for(catalog.recipes["fixture-lab/Carried-Fields-30B"], catalog)
    model = doc["model"]
    assert evidence.supports_dcp is model["supports_dcp"]
    assert evidence.nightly_required is model["nightly_required"]
    assert evidence.flashinfer_autotune is model["flashinfer_autotune"]
    assert evidence.kv_offload_support == doc["kv_offload_support"]
    assert evidence.install["docker"].offered and evidence.install["docker"].note == model["install"]["docker"]["note"]
    assert evidence.install["pip"].offered is False  # `pip: false`: not a way to install this model
    assert [d.command for d in evidence.dependencies] == [d["command"] for d in doc["dependencies"]]
    optional = evidence.dependencies[1]
    assert (optional.optional, optional.brand, optional.install_modes) == (True, "Huawei", ["pip"])


def test_an_unknown_field_is_reported_once_per_file(built_fixtures):
    _, report = built_fixtures
    doc = _source("Carried-Fields-30B")
    mine = [p for p in report.problems if p.file.endswith("Carried-Fields-30B.yaml")]
    assert len(mine) == 1 and mine[0].scope == "warning"
    assert unknown_fields(doc) == ["benchmark_table", "model.quantum_flux"]
    for field in unknown_fields(doc):
        assert field in mine[0].reason
    # Fields the importer knows (read, or prose left out on purpose) are not reported.
    assert {p.file.rsplit("/", 1)[-1] for p in report.problems if "not read by the importer" in p.reason} == {
        "Carried-Fields-30B.yaml", "Omni-Video-20B.yaml"}


def test_an_unknown_field_inside_an_omni_task_is_reported_once_and_the_prose_beside_it_is_not(built_fixtures):
    _, report = built_fixtures
    doc = _source("Omni-Video-20B")
    mine = [p for p in report.problems if p.file.endswith("Omni-Video-20B.yaml")]
    # `sample_seconds` is the one field of the second task the importer does not know; the tasks'
    # description and curl (prose for upstream's web page), `task_axes` and the rest are known.
    assert unknown_fields(doc) == ["omni.tasks[1].sample_seconds"]
    assert [(p.scope, p.field) for p in mine] == [("warning", "(fields)")]
    assert "omni.tasks[1].sample_seconds" in mine[0].reason


@pytest.mark.parametrize(("where", "path"), [
    (lambda d: d["omni"]["tasks"][0], "omni.tasks[0].stage_hint"),
    (lambda d: d["omni"]["tasks"][0]["hardware_overrides"]["rtx_4090_2x"],
     "omni.tasks[0].hardware_overrides.rtx_4090_2x.stage_hint"),
])
def test_nested_omni_blocks_are_checked(where, path):
    doc = _source("Omni-Video-20B")
    where(doc)["stage_hint"] = "x"
    assert path in unknown_fields(doc)


def test_nested_override_dependency_and_install_blocks_are_checked():
    doc = _source("Carried-Fields-30B")
    doc["dependencies"][0]["checksum"] = "abc"
    doc["model"]["install"]["docker"]["digest"] = "sha256:0"
    doc["variants"]["default"]["hardware_overrides"] = {"amd": {"extra_args": ["--x"], "rocm_only": True}}
    doc["hardware_overrides"] = {"nvidia": {"extra_env": {"A": "1"}, "cuda_graphs": "off"}}
    assert unknown_fields(doc) == [
        "benchmark_table", "model.quantum_flux", "model.install.docker.digest", "hardware_overrides.nvidia.cuda_graphs",
        "variants.default.hardware_overrides.amd.rocm_only", "dependencies[0].checksum"]


def test_the_shipped_snapshot_has_no_field_the_importer_does_not_know(built):
    _, report = built
    assert not [p for p in report.problems if "not read by the importer" in p.reason]


def test_omni_tasks_keep_their_per_card_floors(built_fixtures):
    catalog, _ = built_fixtures
    doc = _source("Omni-Video-20B")
    evidence = evidence_for(catalog.recipes["fixture-lab/Omni-Video-20B"], catalog)
    tasks = {t.key or t.id: t for t in evidence.omni_tasks}
    raw = doc["omni"]["tasks"][0]
    t2v = tasks[raw["key"]]
    assert (t2v.vram_minimum_gb, t2v.endpoint) == (raw["vram_minimum_gb"], raw["endpoint"])
    card = raw["hardware_overrides"]["rtx_4090_2x"]
    assert t2v.hardware_overrides["rtx_4090_2x"].vram_minimum_gb == card["vram_minimum_gb"]
    assert t2v.hardware_overrides["rtx_4090_2x"].args == card["extra_args"]
    assert tasks["i2v"].vram_minimum_gb is None  # a bare task id: the variant's floor applies


def test_omni_tasks_keep_their_key_label_checkpoint_and_axes(built_fixtures):
    catalog, _ = built_fixtures
    doc = _source("Omni-Video-20B")
    tasks = evidence_for(catalog.recipes["fixture-lab/Omni-Video-20B"], catalog).omni_tasks
    raw = [t for t in doc["omni"]["tasks"] if isinstance(t, dict)]
    carried = [(t.id, t.key, t.label, t.model_id, t.axes) for t in tasks if t.key]
    assert carried == [(t["id"], t["key"], t["label"], t["model_id"], t["axes"]) for t in raw]
    assert len({t.id for t in tasks if t.key}) == 1  # two entries of one task id, told apart by key
    bare = tasks[-1]
    assert (bare.id, bare.key, bare.label, bare.model_id, bare.axes) == ("i2v", None, None, None, {})


@pytest.fixture
def page_for(built_fixtures, monkeypatch):
    """The public model page of a recipe of the fixtures' catalog (served offline, no token)."""
    import json

    import httpx

    from api.app import create_app
    from api.auth import TokenTable
    from wingsmith.domain.config import Settings

    def page(catalog, path: str) -> str:
        # The fixture trees have no SOURCE.md: stamp them as the shipped catalog is (the page names its sources).
        shipped = load_catalog()
        catalog = catalog.model_copy(update={"vllm_source": shipped.vllm_source,
                                             "dynamo_source": shipped.dynamo_source})
        monkeypatch.setattr("console.models.load_catalog", lambda: catalog)
        settings = Settings(auth_tokens=json.dumps({}), log_format="json", hf_endpoint="http://127.0.0.1:9")
        app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens))
        app.state.hub_quiet_until = float("inf")  # no Hub here: the page shows the recipe's facts alone

        async def get() -> httpx.Response:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://plane") as c:
                return await c.get(f"/console/models/{path}")

        import asyncio
        response = asyncio.run(get())
        assert response.status_code == 200, response.text[:300]
        return response.text
    return page


def _task_rows(html: str) -> list[str]:
    import re
    from html import unescape
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", m)).split())
            for m in re.findall(r'<tr data-task="[^"]*"[^>]*>(.*?)</tr>', html, re.S)]


def test_the_model_page_shows_each_tasks_label_checkpoint_and_axes(built_fixtures, page_for):
    catalog, _ = built_fixtures
    recipe = catalog.recipes["fixture-lab/Omni-Video-20B"]
    html = page_for(catalog, recipe.path)
    full, distilled, bare = _task_rows(html)
    assert "Text to video" in full and "weights: full" in full
    # The checkpoint is shown only where it is not the recipe's own model.
    assert recipe.model_id not in full and "fixture-lab/Omni-Video-20B-Distilled" in distilled
    assert "Text → video (distilled)" in distilled and "weights: distilled" in distilled
    assert 'data-task-key="full_t2v"' in html and 'data-task-key="distilled_t2v"' in html
    assert bare.startswith("i2v")


def test_the_model_page_shows_upstreams_task_words_as_text(built_fixtures, page_for):
    catalog, _ = built_fixtures
    recipe = catalog.recipes["fixture-lab/Omni-Video-20B"]
    hostile = "<script>alert(1)</script>"
    task = recipe.omni_tasks[1].model_copy(update={"label": hostile, "model_id": hostile, "key": '"><b>k',
                                                   "axes": {hostile: hostile}})
    tasks = [recipe.omni_tasks[0], task, *recipe.omni_tasks[2:]]
    bad = recipe.model_copy(update={"omni_tasks": tasks})
    html = page_for(catalog.model_copy(update={"recipes": {**catalog.recipes, recipe.path: bad}}), recipe.path)
    assert hostile not in html and '"><b>k' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_dynamo_entry_serves_its_served_model_name_and_keeps_the_loaded_checkpoint(built_fixtures):
    catalog, _ = built_fixtures
    entry = next(e for e in catalog.dynamo if e.source_path.endswith("agg-served-name/deploy.yaml"))
    assert entry.model_name == "fixture-lab/Fixture-MoE-200B"
    assert entry.model_name_source == "--served-model-name"
    assert entry.loaded_model == "nvidia/Fixture-MoE-200B-NVFP4"
    assert set(entry.model_ids) == {entry.model_name, entry.loaded_model}
    # The aggregated graph's one worker, labelled decode upstream, is the aggregated worker.
    assert entry.mode == "aggregated"
    assert [(w.name, w.role) for w in entry.workers] == [("VllmDecodeWorker", "aggregated")]
    assert entry.max_concurrency.value == 96

"""Fields upstream sets beside the serve command (issue 35 item 4) reach the evidence, and a field the
importer does not know is said once per file, never dropped unseen. Dynamo entries keep the name they
serve and the checkpoint they load (item 3). On the project's fixtures in upstream's format."""

from __future__ import annotations

import pytest
import yaml

from tests.recipes.conftest import FIXTURES
from wingsmith.recipes import build_catalog, evidence_for
from wingsmith.recipes.known_fields import unknown_fields


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
    assert not [p for p in report.problems if "not read by the importer" in p.reason
                and not p.file.endswith("Carried-Fields-30B.yaml")]


def test_the_shipped_snapshot_has_no_field_the_importer_does_not_know(built):
    _, report = built
    assert not [p for p in report.problems if "not read by the importer" in p.reason]


def test_omni_tasks_keep_their_per_card_floors(built_fixtures):
    catalog, _ = built_fixtures
    doc = _source("Omni-Video-20B")
    evidence = evidence_for(catalog.recipes["fixture-lab/Omni-Video-20B"], catalog)
    tasks = {t.id: t for t in evidence.omni_tasks}
    raw = doc["omni"]["tasks"][0]
    t2v = tasks[raw["id"]]
    assert (t2v.vram_minimum_gb, t2v.endpoint) == (raw["vram_minimum_gb"], raw["endpoint"])
    card = raw["hardware_overrides"]["rtx_4090_2x"]
    assert t2v.hardware_overrides["rtx_4090_2x"].vram_minimum_gb == card["vram_minimum_gb"]
    assert t2v.hardware_overrides["rtx_4090_2x"].args == card["extra_args"]
    assert tasks["i2v"].vram_minimum_gb is None  # a bare task id: the variant's floor applies


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

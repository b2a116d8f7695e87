"""The shipped snapshot is faithful to shared/upstream/hf-configs and reproducible from it."""

import json

import pytest

from sim.hub import build_snapshot, load_snapshot
from tests.hub.conftest import upstream_models
from tests.upstream import require_upstream, snapshot_meta

SNAP = load_snapshot()["models"]
UP = upstream_models()


def test_every_upstream_model_is_shipped():
    assert sorted(SNAP) == sorted(UP) and "moonshotai/Kimi-K3" in SNAP


def test_snapshot_rebuilds_identically():
    shipped = json.loads(build_snapshot.DEFAULT_OUT.read_text())["models"]
    assert build_snapshot.build(require_upstream("hf-configs"))["models"] == shipped


@pytest.mark.parametrize("repo_id", sorted(UP))
def test_model_facts(repo_id):
    model, up = SNAP[repo_id], UP[repo_id]
    assert len(model["sha"]) == 40 and int(model["sha"], 16) >= 0
    files = {f["path"]: f for f in model["files"]}
    assert json.loads(files["config.json"]["content"]) == up["config"]
    shards = [f for p, f in files.items() if p.endswith(".safetensors") and "/" not in p]
    assert sum(f["size"] for f in shards) == model["weight_total"]
    published = up["meta"].get("total_size_bytes")
    if published is not None:
        assert (model["weight_total"], model["weight_total_kind"]) == (published, "published")
    else:
        assert model["weight_total_kind"] == "derived" and model["weight_total_note"]
    if len(shards) > 1:
        index = json.loads(files["model.safetensors.index.json"]["content"])
        assert index["metadata"]["total_size"] == model["weight_total"]
        assert sorted(index["weight_map"].values()) == sorted(f["path"] for f in shards)
    assert model["cardData"].get("license")


def test_derived_totals_are_close_to_what_is_known():
    # meta.json notes gpt-oss-120b is "about 65 GB" and gpt-oss-20b "about 13.8 GB" on disk.
    assert SNAP["openai/gpt-oss-120b"]["weight_total"] == pytest.approx(65e9, rel=0.03)
    assert SNAP["openai/gpt-oss-20b"]["weight_total"] == pytest.approx(13.8e9, rel=0.03)
    assert SNAP["deepseek-ai/DeepSeek-R1"]["weight_total"] == pytest.approx(
        UP["deepseek-ai/DeepSeek-R1"]["meta"]["tensor_bytes_from_parameters"], rel=0.001)


@pytest.mark.parametrize("repo_id", sorted(UP))
def test_published_figures_the_bare_clone_tests_use_are_upstreams(repo_id):
    # tests/sizing and tests/hub/test_weights read these from the snapshot instead of meta.json.
    up = UP[repo_id]["meta"]
    assert snapshot_meta(repo_id) == {"total_size_bytes": up.get("total_size_bytes"),
                                      "parameters": up.get("parameters") or None,
                                      "parameters_total": up.get("parameters_total")}

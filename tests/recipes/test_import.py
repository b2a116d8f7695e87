from __future__ import annotations

import json

import pytest
import yaml

from wingsmith.cli.main import build_parser
from wingsmith.recipes import build_catalog, load_catalog, read_catalog, store_catalog_version, write_catalog
from wingsmith.recipes.catalog import SHIPPED_CATALOG, CatalogVersionExists


def test_every_upstream_recipe_and_deploy_file_imports(built, vllm_dir, dynamo_dir):
    catalog, report = built
    assert report.problems == []
    model_files = sorted(vllm_dir.glob("models/*/*.yaml"))
    deploy_files = sorted(dynamo_dir.glob("recipes/**/deploy.yaml"))
    assert len(catalog.recipes) == len(model_files) == report.recipes
    model_paths = {p.relative_to(vllm_dir).as_posix() for p in model_files}
    assert {r.source_path for r in catalog.recipes.values()} == model_paths
    assert report.dynamo_files == len(deploy_files)
    assert {e.source_path for e in catalog.dynamo} == {p.relative_to(dynamo_dir).as_posix() for p in deploy_files}
    assert set(catalog.strategies) == {p.stem for p in (vllm_dir / "strategies").glob("*.yaml")}
    taxonomy = yaml.safe_load((vllm_dir / "taxonomy.yaml").read_text())
    assert set(catalog.hardware) == set(taxonomy["hardware_profiles"])


def test_catalog_is_stamped_with_the_upstream_commits(catalog):
    assert catalog.vllm_source.repository == "https://github.com/vllm-project/recipes"
    assert catalog.vllm_source.commit == "8959cf64189c71d36e11c6a30335f923f261b1f7"
    assert catalog.dynamo_source.commit == "2a6da14c83617f5412caba5777dbf0e2399e9c5f"
    assert catalog.version.startswith("vllm-8959cf64189c.dynamo-2a6da14c8361.")


def test_shipped_catalog_is_the_build_of_shared_upstream(built):
    # If upstream data or the importer changes, `wingsmith recipes import` must be re-run. Every other
    # recipes test reads the shipped catalog, so this is what ties them to upstream's trees.
    catalog, _ = built
    assert load_catalog().version == catalog.version
    assert load_catalog() == catalog


def test_catalog_holds_facts_not_prose(catalog):
    text = SHIPPED_CATALOG.read_text()
    # Guide and description sentences from the Kimi-K3 recipe must not be carried over.
    assert "Kimi Delta Attention" not in text
    assert "Quantization-aware-trained" not in text
    assert "## Overview" not in text


def test_bad_parts_are_dropped_with_file_and_field_and_the_rest_of_each_recipe_imports(snapshot_copy):
    vllm, dynamo = snapshot_copy
    k3 = vllm / "models/moonshotai/Kimi-K3.yaml"
    doc = yaml.safe_load(k3.read_text())
    doc["variants"]["nvfp4"]["vram_minimum_gb"] = "plenty"
    k3.write_text(yaml.safe_dump(doc))
    (vllm / "models/openai/gpt-oss-20b.yaml").write_text("meta: [unclosed\n")
    qwen = vllm / "models/Qwen/Qwen3-32B.yaml"
    doc = yaml.safe_load(qwen.read_text())
    doc["compatible_strategies"].append("single_node_warp")
    qwen.write_text(yaml.safe_dump(doc))
    deploy = dynamo / "recipes/qwen3-32b/vllm/agg-round-robin/deploy.yaml"
    doc = yaml.safe_load(deploy.read_text())
    doc["spec"].pop("services")
    deploy.write_text(yaml.safe_dump(doc))

    catalog, report = build_catalog(vllm, dynamo)
    problems = {p.file: p for p in report.problems}
    assert problems["models/moonshotai/Kimi-K3.yaml"].field == "variants.nvfp4.vram_minimum_gb"
    assert "plenty" in problems["models/moonshotai/Kimi-K3.yaml"].reason
    assert problems["models/openai/gpt-oss-20b.yaml"].field.startswith("line ")
    assert problems["models/Qwen/Qwen3-32B.yaml"].field == "compatible_strategies[2]"
    assert "single_node_warp" in problems["models/Qwen/Qwen3-32B.yaml"].reason
    assert problems["dynamo:recipes/qwen3-32b/vllm/agg-round-robin/deploy.yaml"].field == "spec.components"
    assert len(report.problems) == 4
    scopes = {p.file: p.scope for p in report.problems}
    assert scopes["models/moonshotai/Kimi-K3.yaml"] == scopes["models/Qwen/Qwen3-32B.yaml"] == "part"
    assert scopes["models/openai/gpt-oss-20b.yaml"] == "file"
    # Only the file that is not YAML is lost; the others keep everything but the bad part.
    assert len(catalog.recipes) == 22 - 1
    assert "openai/gpt-oss-20b" not in catalog.recipes
    k3 = catalog.recipes["moonshotai/Kimi-K3"]
    assert "nvfp4" not in k3.variants and "default" in k3.variants
    assert "single_node_warp" not in catalog.recipes["Qwen/Qwen3-32B"].compatible_strategies
    assert catalog.recipes["Qwen/Qwen3-32B"].compatible_strategies
    assert len(catalog.dynamo) == 10


def test_missing_required_field_is_named(snapshot_copy):
    vllm, dynamo = snapshot_copy
    path = vllm / "models/deepseek-ai/DeepSeek-R1.yaml"
    doc = yaml.safe_load(path.read_text())
    del doc["variants"]["default"]["precision"]
    path.write_text(yaml.safe_dump(doc))
    _, report = build_catalog(vllm, dynamo)
    assert [(p.file, p.field, p.reason) for p in report.problems] == [
        ("models/deepseek-ai/DeepSeek-R1.yaml", "variants.default.precision", "missing")]


def _run_cli(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def test_import_command_prints_counts_and_problems(snapshot_copy, tmp_path, capsys):
    vllm, dynamo = snapshot_copy
    (vllm / "models/openai/gpt-oss-20b.yaml").write_text("- not a mapping\n")
    out = tmp_path / "catalog.json"
    code = _run_cli(["recipes", "import", "--vllm", str(vllm), "--dynamo", str(dynamo), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    assert "imported 21 of 22 vLLM recipe files" in captured.out
    assert "11 Dynamo entries from 11 DynamoGraphDeployment manifests" in captured.out
    assert "1 file(s) skipped whole, 0 part(s) dropped" in captured.out
    assert "skipped models/openai/gpt-oss-20b.yaml: field (document)" in captured.err
    assert read_catalog(out).recipes.keys() >= {"moonshotai/Kimi-K3"}
    assert _run_cli(["recipes", "import", "--vllm", str(vllm), "--dynamo", str(dynamo), "--out", str(out),
                     "--strict"]) == 1
    assert _run_cli(["recipes", "import", "--vllm", str(tmp_path / "nope"), "--dynamo", str(dynamo)]) == 2


def test_version_follows_content_and_stored_versions_are_never_rewritten(built, snapshot_copy, tmp_path):
    catalog, _ = built
    vllm, dynamo = snapshot_copy
    assert build_catalog(vllm, dynamo)[0].version == catalog.version  # same facts, same version
    path = vllm / "models/openai/gpt-oss-120b.yaml"
    path.write_text(path.read_text().replace("vram_minimum_gb: 96", "vram_minimum_gb: 97"))
    changed = build_catalog(vllm, dynamo)[0]
    assert changed.version != catalog.version
    stored = store_catalog_version(catalog, tmp_path / "versions")
    before = stored.read_bytes()
    with pytest.raises(CatalogVersionExists):
        store_catalog_version(catalog, tmp_path / "versions")
    assert stored.read_bytes() == before


def test_hand_edited_catalog_is_refused(catalog, tmp_path):
    path = tmp_path / "c.json"
    write_catalog(catalog, path)
    body = json.loads(path.read_text())
    body["recipes"]["moonshotai/Kimi-K3"]["variants"]["default"]["vram_minimum_gb"] = 1.0
    path.write_text(json.dumps(body))
    with pytest.raises(ValueError, match="does not match its version"):
        read_catalog(path)

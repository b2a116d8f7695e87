from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from wingsmith.adapters.recipes.files import (
    SHIPPED_CATALOG,
    CatalogVersionExists,
    build_catalog,
    load_catalog,
    read_catalog,
    store_catalog_version,
    write_catalog,
)
from wingsmith.cli.main import build_parser
from wingsmith.domain.recipes.problems import ImportProblem


def _dgd_files(dynamo_dir: Path) -> set[str]:
    """Every YAML under recipes/ with a DynamoGraphDeployment document, read independently of the importer."""
    found = set()
    for path in (dynamo_dir / "recipes").rglob("*.yaml"):
        docs = yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if any(isinstance(d, dict) and d.get("kind") == "DynamoGraphDeployment" for d in docs):
            found.add(path.relative_to(dynamo_dir).as_posix())
    return found


def _is_kustomize_patch(rel: str) -> bool:
    return "/kustomize/components/" in f"/{rel}" and Path(rel).name.startswith("patch")


def _unexplained_warning(p: ImportProblem, vllm_dir: Path, dynamo_dir: Path, cards: set[str]) -> bool:
    """False when a warning is one of the kinds upstream's trees really hold, checked against the
    file it names; True for anything else (a new kind must be looked at, not waved through)."""
    if p.scope != "warning":
        return True
    if not p.file.startswith("dynamo:"):
        card = p.field.removeprefix("meta.hardware.")
        return not (p.field.startswith("meta.hardware.") and card not in cards
                    and p.reason.startswith("not a hardware profile in taxonomy.yaml")
                    and card in (yaml.safe_load((vllm_dir / p.file).read_text())["meta"]["hardware"] or {}))
    rel = p.file.removeprefix("dynamo:")
    text = (dynamo_dir / rel).read_text()
    if p.field == "spec" and "kustomize patch" in p.reason:
        return not _is_kustomize_patch(rel)
    if p.field.endswith(".args") and "starts with whitespace (a folded scalar?)" in p.reason:
        # A `>-` folded script whose `\` line continuations fold into escaped spaces.
        return not ("- >" in text and " \\\n" in text)
    if p.field.endswith(".nodeSelector") and "is not a mapping (a placeholder" in p.reason:
        return "nodeSelector: ${" not in text
    if p.field.endswith(".replicas") and "scaled to zero" in p.reason:
        return "replicas: 0" not in text
    return True


def test_every_upstream_recipe_and_deploy_file_imports(built, vllm_dir, dynamo_dir):
    catalog, report = built
    # Nothing of upstream is dropped; what is kept with a warning is only upstream data of the kinds
    # the importer knows (cards missing from taxonomy.yaml, kustomize patches, folded scripts,
    # placeholder node selectors), each checked against its file.
    # ... and the manifests that serve a model without Dynamo (a plain `vllm serve` Deployment), reported.
    plain = [p for p in report.problems if p.field == "kind" and "deploys plain Deployment/" in p.reason]
    for problem in plain:
        docs = yaml.safe_load_all((dynamo_dir / problem.file.removeprefix("dynamo:")).read_text())
        assert "Deployment" in {d.get("kind") for d in docs if isinstance(d, dict)}
    assert [p for p in report.problems if p.scope != "warning" and p not in plain] == []
    taxonomy = yaml.safe_load((vllm_dir / "taxonomy.yaml").read_text())
    cards = set(taxonomy["hardware_profiles"])
    assert [p for p in report.problems if p not in plain and _unexplained_warning(p, vllm_dir, dynamo_dir, cards)] == []
    model_files = sorted(vllm_dir.glob("models/*/*.yaml"))
    assert len(catalog.recipes) == len(model_files) == report.recipes == report.recipe_files
    model_paths = {p.relative_to(vllm_dir).as_posix() for p in model_files}
    assert {r.source_path for r in catalog.recipes.values()} == model_paths
    # Every manifest with a graph is an entry (deploy.yaml and the other names: deploy-16gpu.yaml,
    # kustomize bases), except the kustomize patches overlays apply, which are noted instead.
    graphs = _dgd_files(dynamo_dir)
    patches = {g for g in graphs if _is_kustomize_patch(g)}
    assert {p.file.removeprefix("dynamo:") for p in report.problems if "kustomize patch" in p.reason} == patches
    deploy_files = {p.relative_to(dynamo_dir).as_posix() for p in dynamo_dir.glob("recipes/**/deploy.yaml")}
    assert deploy_files <= graphs - patches
    assert {e.source_path for e in catalog.dynamo} == graphs - patches
    assert report.dynamo_files == len(graphs - patches) <= report.dynamo_entries == len(catalog.dynamo)
    assert set(catalog.strategies) == {p.stem for p in (vllm_dir / "strategies").glob("*.yaml")}
    assert set(catalog.hardware) == cards


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


RECIPES_PACKAGE = SHIPPED_CATALOG.parent
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_source_note_names_the_repositories_and_commits_the_shipped_catalog_is_stamped_with(catalog):
    note = (RECIPES_PACKAGE / "SOURCE.md").read_text()
    for stamp in (catalog.vllm_source, catalog.dynamo_source):
        assert stamp.repository and stamp.commit
        assert stamp.repository in note and f"`{stamp.commit}`" in note
    assert "wingsmith recipes import --vllm ../shared/upstream/vllm-recipes --dynamo ../shared/upstream/dynamo" in note
    assert "LICENSE-upstream" in note


def test_the_upstream_licence_ships_beside_the_catalog():
    licence = (RECIPES_PACKAGE / "LICENSE-upstream").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence  # the whole text, not a pointer to it


def test_the_licence_is_upstreams_own_and_covers_both_snapshots(vllm_dir, dynamo_dir):
    assert (RECIPES_PACKAGE / "LICENSE-upstream").read_bytes() == (vllm_dir / "LICENSE").read_bytes()
    # The Dynamo snapshot has no LICENSE file of its own; each file says its licence, and it is the same one.
    files = [p for p in dynamo_dir.rglob("*.yaml")]
    licences = {m for p in files for m in re.findall(r"SPDX-License-Identifier:\s*(\S+)", p.read_text())}
    assert files and licences == {"Apache-2.0"}
    unlabelled = [p for p in files if "SPDX-License-Identifier" not in p.read_text()]
    assert unlabelled == []


def _package_data_patterns(package: str) -> list[str]:
    """The globs setuptools applies to `package` (its own key, and "" or "*" for every package)."""
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]
    includes = config["packages"]["find"]["include"]
    assert any(fnmatch.fnmatchcase(package, pattern) for pattern in includes), (package, includes)
    data = config.get("package-data", {})
    return [g for key in ("", "*", package) for g in data.get(key, [])]


@pytest.mark.parametrize("name", ["catalog.json", "SOURCE.md", "LICENSE-upstream"])
def test_the_catalog_its_source_note_and_licence_are_package_data(name):
    assert (RECIPES_PACKAGE / name).is_file()
    patterns = _package_data_patterns("wingsmith.adapters.recipes")
    assert any(fnmatch.fnmatchcase(name, g) for g in patterns), (
        f"{name} is not in wingsmith.adapters.recipes' package data ({patterns}): an installed plane would lack it")


def test_catalog_holds_facts_not_prose(catalog):
    text = SHIPPED_CATALOG.read_text()
    # Guide and description sentences from the Kimi-K3 recipe must not be carried over.
    assert "Kimi Delta Attention" not in text
    assert "Quantization-aware-trained" not in text
    assert "## Overview" not in text


def _new_problems(report, baseline) -> list[ImportProblem]:
    """The problems of a build that the unbroken upstream build (`baseline`) does not have."""
    return [p for p in report.problems if p not in baseline.problems]


def test_bad_parts_are_dropped_with_file_and_field_and_the_rest_of_each_recipe_imports(built, snapshot_copy):
    upstream, baseline = built
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
    new = _new_problems(report, baseline)
    problems = {p.file: p for p in new}
    assert problems["models/moonshotai/Kimi-K3.yaml"].field == "variants.nvfp4.vram_minimum_gb"
    assert "plenty" in problems["models/moonshotai/Kimi-K3.yaml"].reason
    assert problems["models/openai/gpt-oss-20b.yaml"].field.startswith("line ")
    assert problems["models/Qwen/Qwen3-32B.yaml"].field == "compatible_strategies[2]"
    assert "single_node_warp" in problems["models/Qwen/Qwen3-32B.yaml"].reason
    assert problems["dynamo:recipes/qwen3-32b/vllm/agg-round-robin/deploy.yaml"].field == "spec.components"
    assert len(new) == 4
    # The unbroken files' own warnings are unchanged, and the broken ones lose only what was broken.
    assert set(baseline.problems) - set(report.problems) <= {
        p for p in baseline.problems if p.file in ("models/openai/gpt-oss-20b.yaml",
                                                   "dynamo:recipes/qwen3-32b/vllm/agg-round-robin/deploy.yaml")}
    scopes = {p.file: p.scope for p in new}
    assert scopes["models/moonshotai/Kimi-K3.yaml"] == scopes["models/Qwen/Qwen3-32B.yaml"] == "part"
    assert scopes["models/openai/gpt-oss-20b.yaml"] == "file"
    # Only the file that is not YAML is lost; the others keep everything but the bad part.
    assert len(catalog.recipes) == len(upstream.recipes) - 1
    assert "openai/gpt-oss-20b" not in catalog.recipes
    k3 = catalog.recipes["moonshotai/Kimi-K3"]
    assert "nvfp4" not in k3.variants and "default" in k3.variants
    assert "single_node_warp" not in catalog.recipes["Qwen/Qwen3-32B"].compatible_strategies
    assert catalog.recipes["Qwen/Qwen3-32B"].compatible_strategies
    lost = [e for e in upstream.dynamo if e.source_path == "recipes/qwen3-32b/vllm/agg-round-robin/deploy.yaml"]
    assert len(lost) == 1
    assert catalog.dynamo == [e for e in upstream.dynamo if e not in lost]


def test_missing_required_field_is_named(built, snapshot_copy):
    _, baseline = built
    vllm, dynamo = snapshot_copy
    path = vllm / "models/deepseek-ai/DeepSeek-R1.yaml"
    doc = yaml.safe_load(path.read_text())
    del doc["variants"]["default"]["precision"]
    path.write_text(yaml.safe_dump(doc))
    _, report = build_catalog(vllm, dynamo)
    assert [(p.file, p.field, p.reason) for p in _new_problems(report, baseline)] == [
        ("models/deepseek-ai/DeepSeek-R1.yaml", "variants.default.precision", "missing")]


def _run_cli(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def test_import_command_prints_counts_and_problems(built, snapshot_copy, tmp_path, capsys):
    upstream, baseline = built
    vllm, dynamo = snapshot_copy
    (vllm / "models/openai/gpt-oss-20b.yaml").write_text("- not a mapping\n")
    out = tmp_path / "catalog.json"
    code = _run_cli(["recipes", "import", "--vllm", str(vllm), "--dynamo", str(dynamo), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    files = len(list(vllm.glob("models/*/*.yaml")))
    assert files == baseline.recipe_files == len(upstream.recipes)
    assert f"imported {files - 1} of {files} vLLM recipe files" in captured.out
    assert (f"{baseline.dynamo_entries} Dynamo entries from {baseline.dynamo_files} DynamoGraphDeployment "
            "manifests") in captured.out
    gpt_oss_warnings = [p for p in baseline.problems if p.file == "models/openai/gpt-oss-20b.yaml"]
    warnings = sum(p.scope == "warning" for p in baseline.problems) - len(gpt_oss_warnings)
    # gpt-oss-20b broken here, and the plain `vllm serve` Deployment upstream ships beside its graphs.
    plain = sum(p.scope == "file" for p in baseline.problems)
    assert f"{1 + plain} file(s) skipped whole, 0 part(s) dropped, {warnings} warning(s)" in captured.out
    assert "skipped models/openai/gpt-oss-20b.yaml: field (document)" in captured.err
    for problem in baseline.problems:
        if problem not in gpt_oss_warnings:
            verb = "skipped" if problem.scope == "file" else "warning in"
            assert f"{verb} {problem.file}: field {problem.field}: {problem.reason}" in captured.err
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

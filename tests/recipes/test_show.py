"""`wingsmith recipes show`: the floor warning and `--catalog PATH`."""

from __future__ import annotations

import json

from wingsmith.adapters.recipes.files import build_catalog, write_catalog
from wingsmith.cli.main import build_parser


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["recipes", *argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_show_warns_when_card_times_gpus_is_below_the_variant_floor(capsys):
    code, out, _ = _run(capsys, "show", "deepseek-ai/DeepSeek-V3", "--hardware", "h100")
    assert code == 0
    assert "warning: 8 × h100 hold 640 GB, below variant default's floor of 805 GB (fp8)" in out
    code, out, _ = _run(capsys, "show", "deepseek-ai/DeepSeek-V3", "--hardware", "h200", "--json")
    assert code == 0 and json.loads(out)["warnings"] == []


def test_show_reads_the_catalog_given(capsys, fixture_trees, tmp_path):
    catalog, _ = build_catalog(*fixture_trees)
    path = tmp_path / "fixtures-catalog.json"
    write_catalog(catalog, path)
    code, out, _ = _run(capsys, "show", "fixture-lab/Card-Sized-70B", "--catalog", str(path), "--hardware", "h200")
    assert code == 0
    assert f"catalog {catalog.version}" in out and "single_node_tp on 4x h200" in out
    code, _, err = _run(capsys, "show", "fixture-lab/Card-Sized-70B")  # not in the shipped catalog
    assert code == 1 and "no recipe for fixture-lab/Card-Sized-70B" in err
    code, _, err = _run(capsys, "show", "x/y", "--catalog", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot read --catalog" in err


def test_import_takes_catalog_as_the_output_path(capsys, fixture_trees, tmp_path):
    vllm, dynamo = fixture_trees
    out_path = tmp_path / "built.json"
    code, out, _ = _run(capsys, "import", "--vllm", str(vllm), "--dynamo", str(dynamo), "--catalog", str(out_path))
    assert code == 0 and out_path.exists()
    built, report = build_catalog(vllm, dynamo)
    assert f"imported {len(built.recipes)} of {report.recipe_files} vLLM recipe files" in out
    assert f"from {report.dynamo_files} DynamoGraphDeployment manifests" in out and report.dynamo_files > 10


def test_show_says_an_omni_recipe_has_no_command(capsys, fixture_trees, tmp_path):
    catalog, _ = build_catalog(*fixture_trees)
    path = tmp_path / "fixtures-catalog.json"
    write_catalog(catalog, path)
    code, _, err = _run(capsys, "show", "fixture-lab/Omni-Voice-7B", "--catalog", str(path), "--hardware", "h200")
    assert code == 1 and "is a vLLM-Omni recipe with no layout" in err
    code, out, _ = _run(capsys, "show", "fixture-lab/Omni-Voice-7B", "--catalog", str(path))
    assert code == 0 and "variant default: bf16" in out

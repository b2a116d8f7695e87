"""`wingsmith resolve` prints the same proposal the API returns."""

import json

import pytest

from sim.hub import load_snapshot
from wingsmith.cli.main import build_parser
from wingsmith.domain.config import get_settings

SNAP = load_snapshot()["models"]


@pytest.fixture
def run(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WINGSMITH_HF_ENDPOINT", hub.url)
    monkeypatch.setenv("WINGSMITH_HOME", str(tmp_path))
    monkeypatch.delenv("WINGSMITH_HF_TOKEN_REF", raising=False)
    get_settings.cache_clear()

    def invoke(*argv):
        args = build_parser().parse_args(["resolve", *argv])
        code = args.func(args)
        out = capsys.readouterr()
        return code, out.out, out.err
    yield invoke
    get_settings.cache_clear()


def test_json(run):
    code, out, _ = run("hf:moonshotai/Kimi-K3", "--json")
    body = json.loads(out)
    assert code == 0 and body["weight_bytes"] == 1_560_860_324_864 and body["sha"] == SNAP["moonshotai/Kimi-K3"]["sha"]


def test_table(run):
    code, out, _ = run("openai/gpt-oss-120b")
    assert code == 0
    assert f"commit        {SNAP['openai/gpt-oss-120b']['sha']}" in out
    assert "GptOssForCausalLM" in out and "mxfp4" in out and "duplicates ignored" in out


@pytest.mark.parametrize("source,code,says", [
    ("hf:nope", 2, "must be <org>/<name>"),
    ("nobody/nothing", 3, "no model nobody/nothing"),
    ("meta-llama/Llama-3.1-8B", 4, "gated"),
])
def test_errors(run, source, code, says):
    got, out, err = run(source)
    assert got == code and out == "" and says in err



def test_the_table_shows_the_evidence_and_the_sizing(run):
    """Without --json too: the recipe's evidence (its floors per variant) and the plane's own sizing, as the
    README's first step says (issue 52: they were in the JSON only)."""
    code, out, _ = run("hf:moonshotai/Kimi-K3")
    assert code == 0
    _, as_json, _ = run("hf:moonshotai/Kimi-K3", "--json")
    evidence, sizing = json.loads(as_json)["evidence"], json.loads(as_json)["sizing"]
    assert evidence and sizing["target"] and sizing["sizing"]
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert any(line.startswith(f"evidence vLLM recipe {evidence['recipe']} @ ") for line in lines), out
    for variant in evidence["variants"]:
        assert any(line.startswith(f"variant {variant['name']} ") and f"published floor {variant['vram_minimum_gb']} GB"
                   in line for line in lines), out
    target = sizing["target"]
    reason = " ".join(target["reason"].split())
    assert f"sized on {target['gpus']} × {target['hardware']} {target['layout']}: {reason}" in lines, out
    for entry in sizing["sizing"]:
        if entry.get("report"):
            assert f"sizing {entry['variant']} our floor {entry['report']['floor']['ours_gb']} GB " \
                   f"({entry['report']['floor']['level']})" in lines, out


def test_a_model_no_recipe_matches_says_there_is_no_evidence(run):
    code, out, _ = run("Qwen/Qwen3-235B-A22B")
    assert code == 0
    assert "no vLLM recipe in the catalog matches Qwen/Qwen3-235B-A22B" in out

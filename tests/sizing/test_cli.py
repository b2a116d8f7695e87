from __future__ import annotations

import json

import pytest

from wingsmith.cli.main import build_parser

from .conftest import config_file


def run(capsys, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["size", *argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_carries_kv_weights_and_fit(capsys, tmp_path):
    code, out, _ = run(capsys, "--config", str(config_file("deepseek-ai/DeepSeek-V3", tmp_path)),
                       "--hardware", "h200", "--gpus", "8", "--layout", "single_node_tp",
                       "--context", "8192", "--concurrency", "16", "--kv-dtype", "auto", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kv_bytes_per_token"] == 70_272
    assert "per tensor-parallel rank" in data["kv_bytes_per_token_scope"]
    assert data["weights_bytes"] == 688_586_727_753  # from the meta.json next to the config
    assert data["fits"] is True and data["fit"]["verdict"] == "fits"
    assert data["fit"]["per_gpu"]["weights"]["inputs"]["dense_split"] == 8


def test_weights_bytes_flag_and_estimate_without_meta(capsys, tmp_path):
    cfg = json.loads(config_file("meta-llama/Llama-3.3-70B-Instruct", tmp_path / "published").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, _ = run(capsys, "--config", str(path), "--hardware", "h100", "--gpus", "1", "--json")
    data = json.loads(out)
    assert code == 0 and not data["fits"]
    assert "estimated from the config" in data["weights_bytes_source"]
    code, out, _ = run(capsys, "--config", str(path), "--weights-bytes", "1000", "--gpus", "1", "--json")
    assert json.loads(out)["weights_bytes"] == 1000


def test_text_output_and_floor_warning(capsys, tmp_path):
    code, out, _ = run(capsys, "--config", str(config_file("Qwen/Qwen3-8B", tmp_path)), "--gpus", "1",
                       "--published-floor-gb", "40")
    assert code == 0
    assert "kv per token     147,456 B" in out
    assert "warning" in out and "40 GB" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--config", "/nonexistent/config.json"], "cannot read --config"),
    (["--config", "{prose}"], "is not valid JSON"),
    (["--config", "{qwen}", "--hardware", "tpu"], "unknown hardware 'tpu'"),
    (["--config", "{qwen}", "--gpus", "3"], "does not divide"),
    (["--config", "{qwen}", "--weights-bytes", "0"], "must be positive"),
])
def test_errors_exit_2_with_a_clear_message(capsys, tmp_path, argv, message):
    prose = tmp_path / "SOURCE.md"
    prose.write_text("# Published configs\n\nNot a config.\n")
    files = {"prose": str(prose), "qwen": str(config_file("Qwen/Qwen3-8B", tmp_path))}
    code, out, err = run(capsys, *(a.format(**files) for a in argv))
    assert code == 2 and message in err and out == ""

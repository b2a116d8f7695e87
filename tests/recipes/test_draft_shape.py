"""A draft sizes each variant on the shape its recipe tests, on the offline Hub through the real
`huggingface_hub` client: the same GPU count `serve_command` builds and `wingsmith size --gpus` checks."""

from __future__ import annotations

import json

import pytest

from sim.hub import start_hub_server
from tests.upstream import snapshot_config_text
from wingsmith.adapters.hub.resolver import Resolver
from wingsmith.adapters.proposals import with_evidence_and_sizing
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.cli.main import build_parser
from wingsmith.domain.recipes import serve_command


@pytest.fixture(scope="module")
def hub_url():
    handle = start_hub_server(grants={})
    yield handle.url
    handle.stop()


@pytest.fixture(scope="module")
def deepseek_v3(hub_url, tmp_path_factory):
    resolver = Resolver(hub_url, None, tmp_path_factory.mktemp("hf-cache"))
    return with_evidence_and_sizing(resolver.resolve("deepseek-ai/DeepSeek-V3"))


def test_deepseek_v3_draft_sizes_on_the_recipes_gpu_count(deepseek_v3):
    sizing = deepseek_v3.sizing
    catalog = load_catalog()
    recipe = catalog.recipes["deepseek-ai/DeepSeek-V3"]
    for entry in sizing["sizing"]:
        target = entry["target"]
        command = serve_command(recipe, entry["variant"], target["hardware"], target["layout"], catalog=catalog)
        # The smallest B200 shape (a divisor of the node) that holds the variant's floor: the FP8 default's
        # 805 GB takes the whole node, the FP4 variant's 403 GB half of it; never the bare minimum of 1.
        expected = {"default": 8, "fp4": 4}[entry["variant"]]
        assert target["gpus"] == command.gpus == expected
        assert entry["report"]["fit"]["gpus"] == expected
        assert entry["report"]["fit"]["verdict"] == "fits"
    assert sizing["target"]["gpus"] == 8


def test_deepseek_v3_draft_has_no_unknown_quantization_warning(deepseek_v3):
    sizing = deepseek_v3.sizing
    assert not [w for w in sizing["warnings"] if "unknown quantization" in w]
    fp4 = next(s for s in sizing["sizing"] if s["variant"] == "fp4")
    assert fp4["note"] is None and fp4["weight"]["figure"]["inputs"]["scheme"] == "fp4"


def test_size_cli_at_the_drafts_gpu_count_gives_the_drafts_figures(deepseek_v3, capsys, tmp_path):
    default = next(s for s in deepseek_v3.sizing["sizing"] if s["variant"] == "default")
    target, report = default["target"], default["report"]
    config = tmp_path / "config.json"  # DeepSeek-V3's published config, as the shipped Hub snapshot holds it
    config.write_text(snapshot_config_text("deepseek-ai/DeepSeek-V3"))
    args = build_parser().parse_args([
        "size", "--config", str(config),
        "--hardware", target["hardware"], "--layout", target["layout"], "--gpus", str(target["gpus"]),
        "--weights-bytes", str(report["weights_bytes"]), "--json"])
    assert args.func(args) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["fit"]["gpus"] == report["fit"]["gpus"]
    assert cli["fit"]["headroom_gb"] == report["fit"]["headroom_gb"]

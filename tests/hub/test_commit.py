"""`wingsmith hub commit`: a new commit on main of a model in the offline Hub, changing config.json;
the real `huggingface_hub` client then sees main at the new sha with the new config, and the older
commit keeps its own files (as on the Hub)."""

from __future__ import annotations

import json

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download

from sim.hub import start_hub_server
from wingsmith.cli.main import build_parser
from wingsmith.domain.config import get_settings

REPO = "Qwen/Qwen3-8B"


@pytest.fixture
def own_hub():
    handle = start_hub_server()  # its own copy of the snapshot: commits here touch no other test
    yield handle
    handle.stop()


@pytest.fixture
def hub_cli(own_hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WINGSMITH_HF_ENDPOINT", own_hub.url)
    monkeypatch.setenv("WINGSMITH_HOME", str(tmp_path))
    get_settings.cache_clear()

    def invoke(*argv: str) -> tuple[int, str, str]:
        args = build_parser().parse_args(["hub", "commit", *argv])
        code = args.func(args)
        out = capsys.readouterr()
        return code, out.out, out.err
    yield invoke
    get_settings.cache_clear()


def _config(url: str, tmp_path, revision: str) -> dict:
    path = hf_hub_download(REPO, "config.json", revision=revision, endpoint=url, cache_dir=tmp_path / "cache")
    return json.loads(open(path).read())


def test_commit_moves_main_and_keeps_the_old_commit(own_hub, hub_cli, tmp_path):
    api = HfApi(endpoint=own_hub.url)
    old = api.model_info(REPO).sha
    before = _config(own_hub.url, tmp_path, old)

    code, out, err = hub_cli(REPO, "--set", "max_position_embeddings=65536", "--set", "rope_scaling.factor=4.0",
                             "--set", "torch_dtype=float16")
    assert code == 0, err
    new = out.strip()
    assert len(new) == 40 and new != old
    assert api.model_info(REPO).sha == new
    after = _config(own_hub.url, tmp_path, new)
    assert after["max_position_embeddings"] == 65536 and after["torch_dtype"] == "float16"
    assert after["rope_scaling"]["factor"] == 4.0
    assert {k: v for k, v in after.items() if k not in ("max_position_embeddings", "torch_dtype", "rope_scaling")} \
        == {k: v for k, v in before.items() if k not in ("max_position_embeddings", "torch_dtype", "rope_scaling")}
    assert _config(own_hub.url, tmp_path / "again", old) == before  # the older commit is unchanged
    assert api.model_info(REPO, revision=old).sha == old


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["nobody/nothing", "--set", "a=1"], 3, "Repository not found"),
    (["Qwen/Qwen3-8B", "--set", "novalue"], 2, "--set wants KEY=VALUE"),
    (["Qwen/Qwen3-8B", "--set", "max_position_embeddings.x=1"], 2, "is not an object"),
])
def test_refusals(hub_cli, argv, code, message):
    got, _, err = hub_cli(*argv)
    assert got == code and message in err, err


def test_not_an_offline_hub(hub_cli, monkeypatch, own_hub):
    """Only the offline Hub has the route: pointed elsewhere, the command says so."""
    r = httpx.post(f"{own_hub.url}/_sim/other", json={})
    assert r.status_code == 404
    monkeypatch.setenv("WINGSMITH_HF_ENDPOINT", own_hub.url + "/not-a-hub-root")
    get_settings.cache_clear()
    code, _, err = hub_cli(REPO, "--set", "a=1")
    assert code == 3 and "is not the offline Hub" in err, err

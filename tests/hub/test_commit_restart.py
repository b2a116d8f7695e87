"""Offline Hub commits outlive the Hub, as the simulated clusters' objects do: a Hub started again on
the same home serves main at the committed sha, and both the new and the old revision keep their own
files. `wingsmith hub list` names every repo, where main is and the commits made on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from huggingface_hub import HfApi, hf_hub_download

from sim.hub import start_hub_server

REPO = "Qwen/Qwen3-8B"


def _config(url: str, cache, revision: str) -> dict:
    return json.loads(open(hf_hub_download(REPO, "config.json", revision=revision, endpoint=url,
                                           cache_dir=cache)).read())


def _cli(home, url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_")}
    env.update(WINGSMITH_HOME=str(home), WINGSMITH_HF_ENDPOINT=url)
    return subprocess.run([sys.executable, "-m", "wingsmith.cli.main", "hub", *argv], env=env,
                          capture_output=True, text=True, timeout=60)


def test_commits_survive_a_restart_and_are_listed(tmp_path):
    state = tmp_path / "hub"
    with start_hub_server(home=state) as hub:
        old = HfApi(endpoint=hub.url).model_info(REPO).sha
        made = _cli(tmp_path, hub.url, "commit", REPO, "--set", "max_position_embeddings=65536")
        assert made.returncode == 0, made.stderr
        new = made.stdout.strip()
        second = _cli(tmp_path, hub.url, "commit", REPO, "--set", "torch_dtype=float16")
        assert second.returncode == 0, second.stderr
        newest = second.stdout.strip()

    with start_hub_server(home=state) as again:  # a new process's worth of state: only the home carries over
        api = HfApi(endpoint=again.url)
        assert api.model_info(REPO).sha == newest
        assert api.model_info(REPO, revision=new).sha == new
        assert _config(again.url, tmp_path / "c1", new)["max_position_embeddings"] == 65536
        assert _config(again.url, tmp_path / "c2", new).get("torch_dtype") != "float16"
        assert _config(again.url, tmp_path / "c3", newest)["torch_dtype"] == "float16"
        assert "max_position_embeddings" not in _config(again.url, tmp_path / "c4", old) or \
            _config(again.url, tmp_path / "c4", old)["max_position_embeddings"] != 65536

        listed = _cli(tmp_path, again.url, "list")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert any(line.startswith(REPO) and newest in line for line in lines)
        for sha, key in ((new, "max_position_embeddings"), (newest, "torch_dtype")):
            assert any(sha in line and key in line for line in lines), listed.stdout
        assert len([line for line in lines if line and not line.startswith(" ")]) == len(again.state.models)



def _serve(home) -> tuple[subprocess.Popen[str], str]:
    """`python -m sim.hub --home`, as `wingsmith up --offline-hub` runs it, on a free port."""
    proc = subprocess.Popen([sys.executable, "-m", "sim.hub", "--port", "0", "--home", str(home)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    return proc, line.rsplit(" at ", 1)[-1].strip()


def test_the_hub_process_keeps_commits_in_its_home(tmp_path):
    home = tmp_path / "hub"
    first, url = _serve(home)
    try:
        made = _cli(tmp_path, url, "commit", REPO, "--set", "max_position_embeddings=65536")
        assert made.returncode == 0, made.stderr
    finally:
        first.terminate()
        first.wait(timeout=10)
    second, url = _serve(home)
    try:
        assert HfApi(endpoint=url).model_info(REPO).sha == made.stdout.strip()
    finally:
        second.terminate()
        second.wait(timeout=10)

"""`python -m sim.hub.build_snapshot` on hf-configs trees the test writes in upstream's layout
(`<org>/<name>/config.json` + `meta.json`) from the shipped snapshot: runs on a bare clone. The rebuild
from upstream's own tree is checked in the upstream tier (test_snapshot.py)."""

from __future__ import annotations

import json
from pathlib import Path

from sim.hub import build_snapshot, load_snapshot
from tests.upstream import snapshot_config_text, snapshot_meta, snapshot_repos

V3, R1 = "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1"


def write_hf_configs(root: Path, repos: list[str]) -> Path:
    """The shipped models' configs and published figures as upstream's hf-configs folder holds them."""
    shipped = load_snapshot()["models"]
    for repo_id in repos:
        folder = root / repo_id
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(snapshot_config_text(repo_id))
        meta = snapshot_meta(repo_id)
        if meta["total_size_bytes"] is not None:
            meta["total_size_kind"] = shipped[repo_id]["weight_total_note"]
        (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return root


def test_the_shipped_figures_rebuild_the_shipped_snapshot(tmp_path):
    hf_configs = write_hf_configs(tmp_path / "hf-configs", snapshot_repos())
    out = tmp_path / "snapshot.json"
    assert build_snapshot.main(["--upstream", str(hf_configs), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["models"] == load_snapshot()["models"]


def test_derived_totals_come_from_the_tree_given_by_upstream(tmp_path):
    # DeepSeek-R1 publishes no total and borrows DeepSeek-V3's: from --upstream, never the default path.
    hf_configs = write_hf_configs(tmp_path / "elsewhere", [V3, R1])
    meta = json.loads((hf_configs / V3 / "meta.json").read_text())
    meta["total_size_bytes"] = 123_456_789_000
    (hf_configs / V3 / "meta.json").write_text(json.dumps(meta))
    out = tmp_path / "snapshot.json"
    assert build_snapshot.main(["--upstream", str(hf_configs), "--out", str(out)]) == 0
    models = json.loads(out.read_text())["models"]
    assert sorted(models) == [R1, V3]
    assert models[R1]["weight_total"] == models[V3]["weight_total"] == 123_456_789_000
    assert models[R1]["weight_total_kind"] == "derived"

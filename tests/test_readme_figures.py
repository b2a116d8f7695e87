"""The README's table of current figures is what bench/readme_figures.py makes of the `bench/report.py --json`
report its marker names, so the README cannot say something the recorded measurement does not."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # no server: a document and a JSON file

ROOT = Path(__file__).resolve().parent.parent


def _writer():
    """bench/readme_figures.py, imported as its siblings expect, without leaving bench/ on the path (its
    `profile.py` would shadow the standard library's for every later test of this process)."""
    saved = list(sys.path)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("readme_figures")
    finally:
        sys.path[:] = saved


writer = _writer()

# A report as bench/report.py writes it (the fields the table reads), 2 runs of two measures.
REPORT = {
    "command": "bench/report.py --only placement,gateway,perf --runs 2 --json r.json",
    "started_at": "2026-01-02T03:04:05+00:00", "quick": False, "runs_per_measure": 2,
    "machine": {"cpus": 2, "python": "3.11.7", "load_average_at_start": [0.5, 0.4, 0.3]},
    "placement_1k_p99_cpu_ms": 2.5, "placement_10k_p99_cpu_ms": 61.0,
    "gateway_p99_vs_pipe_ratio": 1.2, "sse_first_byte_added_p50_ms": 0.3,
    "gateway": {"litellm": "not installed"},
    "perf": "not installed (pip install -e '.[perf]' adds AIConfigurator)",
    "median": {"placement_1k_p99_cpu_ms": 2.25, "placement_10k_p99_cpu_ms": 50.5,
               "gateway_p99_vs_pipe_ratio": 1.1, "sse_first_byte_added_p50_ms": 0.25},
    "runs": {
        "placement": [{"load_average_at_start": [0.5, 0.4, 0.3], "load_average_at_end": [1.25, 0.5, 0.3],
                       "placement_1k_p99_cpu_ms": 2.0, "placement_10k_p99_cpu_ms": 61.0},
                      {"load_average_at_start": [1.25, 0.5, 0.3], "load_average_at_end": [0.75, 0.5, 0.3],
                       "placement_1k_p99_cpu_ms": 2.5, "placement_10k_p99_cpu_ms": 40.0}],
        "gateway": [{"load_average_at_start": [2.0, 1.0, 1.0], "load_average_at_end": [3.5, 1.0, 1.0],
                     "gateway_p99_vs_pipe_ratio": 1.2, "sse_first_byte_added_p50_ms": 0.3},
                    {"load_average_at_start": [3.5, 1.0, 1.0], "load_average_at_end": [2.25, 1.0, 1.0],
                     "gateway_p99_vs_pipe_ratio": 1.0, "sse_first_byte_added_p50_ms": 0.2}]},
    "met": {"placement_1k_p99_cpu_ms": True, "placement_10k_p99_cpu_ms": False,
            "gateway_p99_vs_pipe_ratio": True, "sse_first_byte_added_p50_ms": True},
}

TABLE = "\n".join([
    "| measure | figure: worst run (median) | target | met | conditions |",
    "|---|---|---|---|---|",
    "| journey vs bare Temporal | not measured in this report | ≤ 1.3× | – | |",
    "| cached resolve p99 vs /healthz p99, 8 callers | not measured in this report | ≤ 1.5× | – | |",
    "| chat via gateway p99 vs via a byte pipe p99 | 1.20× (1.10×) | ≤ 1.25× | yes | "
    "2 runs, 2 CPUs, 1-min load 2.0–3.5 |",
    "| gateway req/s vs LiteLLM proxy req/s, 8 connections | "
    "not measured: LiteLLM not installed (WINGSMITH_BENCH_LITELLM) | ≥ 30× | – | |",
    "| first streamed byte via gateway, added at p50 | 0.30 ms (0.25 ms) | ≤ 1 ms | yes | "
    "2 runs, 2 CPUs, 1-min load 2.0–3.5 |",
    "| placement, 1,000 clusters, CPU p99 | 2.50 ms (2.25 ms) | ≤ 8 ms | yes | 2 runs, 2 CPUs, 1-min load 0.5–1.2 |",
    "| placement, 10,000 clusters, CPU p99 | 61.00 ms (50.50 ms) | ≤ 60 ms | **no** | "
    "2 runs, 2 CPUs, 1-min load 0.5–1.2 |",
    "| a draft's estimate, cached (median) | "
    "not measured: not installed (pip install -e '.[perf]' adds AIConfigurator) | ≤ 100 ms | – | |",
    "| autoscaled ramp 1× → 10× → 1×: requests within TTFT 500 ms | not measured in this report | ≥ 0.95 | – | |",
    "| autoscaled ramp: GPU-hours vs an oracle knowing the ramp | not measured in this report | ≤ 1.25× | – | |",
    "",
    "From `bench/report.py --only placement,gateway,perf --runs 2 --json r.json`, started 2026-01-02T03:04:05+00:00 "
    "(2 CPUs, Python 3.11.7).",
    "",
])


def test_a_report_is_rendered_into_the_table():
    assert writer.render(REPORT) == TABLE


def test_a_note_and_a_quick_run_are_said():
    quick = {**REPORT, "quick": True, "note": "Beside the test suite."}
    text = writer.render(quick)
    assert text.endswith("(2 CPUs, Python 3.11.7).\nBeside the test suite.\n")
    assert "1-min load 0.5–1.2; quick: a smoke run, not a figure |" in text


def test_writing_replaces_only_the_marked_block():
    readme = ("# Title\n\nbefore\n\n<!-- figures: old.json (whatever) -->\n| stale |\n<!-- /figures -->\n\nafter\n")
    written = writer.write(readme, REPORT, "bench/figures-9.9.9.json")
    assert written.startswith("# Title\n\nbefore\n\n<!-- figures: bench/figures-9.9.9.json (")
    assert written.endswith(f"-->\n{TABLE}<!-- /figures -->\n\nafter\n")
    assert writer.recorded(written) == ("bench/figures-9.9.9.json", TABLE)
    assert writer.write(written, REPORT, "bench/figures-9.9.9.json") == written
    with pytest.raises(ValueError, match="no `<!-- figures"):
        writer.write("# A README without the block\n", REPORT, "r.json")


def test_the_readme_table_is_what_its_recorded_report_makes():
    source, table = writer.recorded((ROOT / "README.md").read_text())
    recorded = ROOT / source
    assert recorded.parent == ROOT / "bench" and recorded.is_file(), f"the README names {source}, not committed"
    assert table == writer.render(json.loads(recorded.read_text())), (
        f"README.md's figures are not {source}'s: run .venv/bin/python bench/readme_figures.py {source}")


def test_check_fails_a_readme_edited_by_hand(tmp_path, capsys):
    readme = (ROOT / "README.md").read_text()
    (tmp_path / "README.md").write_text(readme)
    assert writer.main(["--check", "--readme", str(tmp_path / "README.md")]) == 0
    source, table = writer.recorded(readme)
    (tmp_path / "README.md").write_text(readme.replace(table, table.replace("| yes |", "| **no** |", 1)))
    assert writer.main(["--check", "--readme", str(tmp_path / "README.md")]) == 1
    assert f"not {source}'s" in capsys.readouterr().err


def test_measure_runs_the_report_then_writes_its_table(tmp_path, monkeypatch):
    readme, out = tmp_path / "README.md", tmp_path / "figures-9.9.9.json"
    readme.write_text("# T\n\n<!-- figures: none.json -->\n<!-- /figures -->\n")
    asked = []

    def report_main(argv):  # bench/report.py's main, without measuring anything
        asked.append(argv)
        out.write_text(json.dumps(REPORT))
        return 0

    monkeypatch.setattr(writer.bench_report, "main", report_main)
    assert writer.main(["--measure", "--note", "Quiet.", "--readme", str(readme), str(out)]) == 0
    assert asked == [["--runs", "3", "--json", str(out)]]
    assert json.loads(out.read_text())["note"] == "Quiet."
    noted = writer.render({**REPORT, "note": "Quiet."})
    assert writer.recorded(readme.read_text()) == (out.resolve().as_posix(), noted)
    assert writer.main(["--check", "--readme", str(readme)]) == 0


def test_a_measure_run_later_is_merged_into_the_release_report_and_named(tmp_path):
    later = {"command": "bench/report.py --only autoscale --runs 2 --json a.json",
             "started_at": "2026-01-03T00:00:00+00:00", "quick": False, "runs_per_measure": 2,
             "machine": {"cpus": 2, "python": "3.11.7"}, "note": "one run beside the suite",
             "autoscale_within_ttft_share": 0.97, "autoscale_gpu_hours_vs_oracle": 1.2, "autoscale": {"flaps": 0},
             "median": {"autoscale_within_ttft_share": 0.98, "autoscale_gpu_hours_vs_oracle": 1.1},
             "met": {"autoscale_within_ttft_share": True, "autoscale_gpu_hours_vs_oracle": True},
             "runs": {"autoscale": [{"load_average_at_start": [0.2, 0, 0], "load_average_at_end": [4.0, 0, 0],
                                     "autoscale_within_ttft_share": 0.97, "autoscale_gpu_hours_vs_oracle": 1.2}]}}
    both = writer.merged({**REPORT, "note": "Quiet."}, later)
    assert both["command"] == REPORT["command"] and both["placement_10k_p99_cpu_ms"] == 61.0
    assert both["median"]["placement_1k_p99_cpu_ms"] == 2.25
    assert both["median"]["autoscale_gpu_hours_vs_oracle"] == 1.1
    assert set(both["runs"]) == {"placement", "gateway", "autoscale"}
    assert both["note"] == ("Quiet. The autoscale rows: from `bench/report.py --only autoscale --runs 2 --json "
                            "a.json`, started 2026-01-03T00:00:00+00:00 (2 CPUs, Python 3.11.7); one run beside "
                            "the suite.")
    table = writer.render(both)
    assert ("| autoscaled ramp: GPU-hours vs an oracle knowing the ramp | 1.20× (1.10×) | ≤ 1.25× | yes | 1 run, "
            "2 CPUs, 1-min load 0.2–4.0 |") in table
    assert "| placement, 10,000 clusters, CPU p99 | 61.00 ms (50.50 ms) | ≤ 60 ms | **no** |" in table
    with pytest.raises(ValueError, match="no runs"):
        writer.merged(REPORT, {**later, "runs": {}})
    release, other, readme = tmp_path / "figures.json", tmp_path / "later.json", tmp_path / "README.md"
    release.write_text(json.dumps(REPORT))
    other.write_text(json.dumps(later))
    readme.write_text("# T\n\n<!-- figures: none.json -->\n<!-- /figures -->\n")
    assert writer.main(["--merge", str(other), "--readme", str(readme), str(release)]) == 0
    assert json.loads(release.read_text())["autoscale_gpu_hours_vs_oracle"] == 1.2
    assert "1.20× (1.10×)" in readme.read_text()


def test_runs_of_a_measure_both_reports_ran_are_judged_together():
    def one(share: float, ratio: float, load: float, seen: str) -> dict:
        return {"command": f"bench/report.py --only autoscale --runs 1 ({seen})",
                "started_at": "2026-01-03T00:00:00+00:00",
                "machine": {"cpus": 2, "python": "3.11.7"}, "autoscale_within_ttft_share": share,
                "autoscale_gpu_hours_vs_oracle": ratio, "autoscale": {"seen": seen},
                "median": {"autoscale_within_ttft_share": share, "autoscale_gpu_hours_vs_oracle": ratio},
                "met": {"autoscale_within_ttft_share": share >= 0.95, "autoscale_gpu_hours_vs_oracle": ratio <= 1.25},
                "targets": {"autoscale_within_ttft_share": 0.95, "autoscale_gpu_hours_vs_oracle": 1.25},
                "runs": {"autoscale": [{"load_average_at_start": [load, 0, 0], "load_average_at_end": [load, 0, 0],
                                        "autoscale_within_ttft_share": share, "autoscale_gpu_hours_vs_oracle": ratio}]}}
    quiet, beside, third = one(0.97, 1.2, 0.1, "quiet"), one(0.96, 1.3, 4.0, "beside"), one(0.99, 1.1, 0.2, "again")
    both = writer.merged(writer.merged(REPORT, quiet), beside)
    assert len(both["runs"]["autoscale"]) == 2 and both["autoscale"] == {"seen": "beside"}
    assert (both["autoscale_within_ttft_share"], both["autoscale_gpu_hours_vs_oracle"]) == (0.96, 1.3)
    assert both["median"]["autoscale_gpu_hours_vs_oracle"] == 1.25 and both["met"] == {
        **REPORT["met"], "autoscale_within_ttft_share": True, "autoscale_gpu_hours_vs_oracle": False}
    three = writer.merged(both, third)  # a better run does not take the worst run's details away
    assert three["autoscale"] == {"seen": "beside"} and three["autoscale_gpu_hours_vs_oracle"] == 1.3
    assert three["median"]["autoscale_gpu_hours_vs_oracle"] == 1.2

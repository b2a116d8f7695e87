"""bench/report.py runs on the base install and writes the figures it promises."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def base_install() -> set[str]:
    """Distributions the base install brings (wingsmith's dependencies without extras, transitively)."""
    seen: set[str] = set()
    todo = ["wingsmith"]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


# What only the test extras add (pyproject.toml [project.optional-dependencies] test), by import name.
TEST_ONLY = sorted({"pytest", "pytest_asyncio", "hypothesis", "psutil", "openai", "playwright", "schemathesis"}
                   - {canonicalize_name(n).replace("-", "_") for n in base_install()})
BLOCK = f"""
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {TEST_ONLY!r}:
            raise ImportError(f"{{name}} comes with the test extras only")
sys.meta_path.insert(0, Refuse())
sys.argv = ["bench/report.py", *sys.argv[1:]]
import runpy
runpy.run_path("bench/report.py", run_name="__main__")
"""


def run_report(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_it_imports_nothing_from_the_test_extras():
    assert {"pytest", "hypothesis", "openai"} <= set(TEST_ONLY)  # the check below checks something
    done = run_report("--help")
    assert done.returncode == 0, done.stderr
    assert "--json" in done.stdout


@pytest.mark.slow
def test_quick_placement_and_gateway_report(tmp_path):
    out = tmp_path / "report.json"
    done = run_report("--quick", "--only", "placement,gateway", "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert set(report["targets"]) == {"placement_10k_p99_cpu_ms", "placement_1k_p99_cpu_ms",
                                      "gateway_p99_vs_pipe_ratio", "sse_first_byte_added_p50_ms"}
    assert report["runs_per_measure"] == 1 and [len(r) for r in report["runs"].values()] == [1, 1]
    assert report["machine"]["cpus"] == os.cpu_count() and len(report["machine"]["load_average_at_start"]) == 3
    assert report["placement_10k_p99_cpu_ms"] == report["placement"]["growth"][-1]["cpu"]["p99_ms"] > 0
    assert [r["clusters"] for r in report["placement"]["growth"]] == [100, 1_000, 10_000]
    gateway = report["gateway"]
    assert report["gateway_p99_vs_pipe_ratio"] == pytest.approx(
        gateway["via_gateway"]["p99_ms"] / gateway["via_byte_pipe"]["p99_ms"], abs=1e-3)
    assert gateway["direct"]["n"] == gateway["via_gateway"]["n"] == gateway["via_byte_pipe"]["n"] == 300
    assert gateway["byte_pipe_p99_ratio"] == pytest.approx(
        gateway["via_byte_pipe"]["p99_ms"] / gateway["direct"]["p99_ms"], abs=1e-3)
    first = gateway["first_streamed_byte"]
    assert report["sse_first_byte_added_p50_ms"] == pytest.approx(
        first["via_gateway"]["p50_ms"] - first["direct"]["p50_ms"], abs=1e-3)
    for name in ("direct", "via_gateway"):
        rate = gateway["throughput"][name]
        assert rate["requests"] > 0 and rate["rps"] == pytest.approx(rate["requests"] / rate["seconds"], rel=0.01)
    assert gateway["litellm"] == "not installed" and 0 < gateway["gateway_rss_mb"] < 1024
    assert set(report["met"]) == set(report["targets"])
    assert "placement, 10,000 clusters" in done.stdout and "chat via gateway" in done.stdout
    assert "LiteLLM proxy: not installed" in done.stdout and "load average" in done.stdout
    assert "a byte pipe (no HTTP parsed)" in done.stdout


def test_the_worst_run_is_judged_and_the_median_shown(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    report_module = importlib.import_module("report")
    figures = iter([{"gateway_p99_vs_pipe_ratio": 1.1, "sse_first_byte_added_p50_ms": 0.2,
                     "gateway_vs_litellm_throughput": 40.0, "gateway": {"run": 1, "byte_pipe_p99_ratio": 1.05}},
                    {"gateway_p99_vs_pipe_ratio": 1.3, "sse_first_byte_added_p50_ms": 0.1,
                     "gateway_vs_litellm_throughput": 35.0, "gateway": {"run": 2}},
                    {"gateway_p99_vs_pipe_ratio": 1.0, "sse_first_byte_added_p50_ms": 0.9,
                     "gateway_vs_litellm_throughput": 31.0, "gateway": {"run": 3}}])
    monkeypatch.setitem(report_module.RUNNERS, "gateway", lambda quick: next(figures))
    report: dict = {}
    report_module.run_measure("gateway", 3, True, report)
    assert report["gateway_p99_vs_pipe_ratio"] == 1.3 and report["sse_first_byte_added_p50_ms"] == 0.9  # each at
    assert report["gateway_vs_litellm_throughput"] == 31.0  # its worst: a floor at its lowest
    assert report["median"] == {"gateway_p99_vs_pipe_ratio": 1.1, "sse_first_byte_added_p50_ms": 0.2,
                                "gateway_vs_litellm_throughput": 35.0}
    assert report["gateway"] == {"run": 2}  # the details of the run furthest over its targets (1.3 / 1.25)
    assert [r.get("byte_pipe_p99_ratio") for r in report["runs"]["gateway"]] == [1.05, None, None]
    assert [r["gateway_p99_vs_pipe_ratio"] for r in report["runs"]["gateway"]] == [1.1, 1.3, 1.0]
    assert all(len(r["load_average_at_start"]) == 3 for r in report["runs"]["gateway"])


def test_an_unknown_measure_is_refused():
    done = run_report("--only", "placement,nonsense")
    assert done.returncode == 2 and "unknown measure(s) nonsense" in done.stderr


def test_series_take_turns_in_a_rotating_order(monkeypatch):
    """Each series follows each other series as often (they share one frontend, still finishing the
    previous answer when the next request reaches it)."""
    import collections

    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    rotated = importlib.import_module("gateway_speed").rotated

    order = rotated(3, 300)
    assert collections.Counter(order) == {0: 300, 1: 300, 2: 300}
    follows = collections.Counter(zip(order, order[1:], strict=False))
    assert all(follows[(a, b)] >= 99 for a in range(3) for b in range(3) if a != b)
    assert rotated(2, 4) == [0, 1, 1, 0, 0, 1, 1, 0]

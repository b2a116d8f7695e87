"""bench/report.py runs on the base install and writes the figures it promises."""

from __future__ import annotations

import json
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
    assert set(report["targets"]) == {"placement_10k_p99_cpu_ms", "gateway_p99_ratio"}
    assert report["placement_10k_p99_cpu_ms"] == report["placement"]["growth"][-1]["cpu"]["p99_ms"] > 0
    assert [r["clusters"] for r in report["placement"]["growth"]] == [100, 1_000, 10_000]
    gateway = report["gateway"]
    assert report["gateway_p99_ratio"] == pytest.approx(gateway["via_gateway"]["p99_ms"] / gateway["direct"]["p99_ms"],
                                                        abs=1e-3)
    assert gateway["direct"]["n"] == gateway["via_gateway"]["n"] == 300
    assert set(report["met"]) == set(report["targets"])
    assert "placement, 10,000 clusters" in done.stdout and "chat via gateway" in done.stdout


def test_an_unknown_measure_is_refused():
    done = run_report("--only", "placement,nonsense")
    assert done.returncode == 2 and "unknown measure(s) nonsense" in done.stderr

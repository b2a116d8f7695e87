"""`wingsmith demo` on a fresh `wingsmith up --offline-hub`: the whole seed journey, as a new user
runs it, ends with a chat completion through the gateway."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from tests.foundation.test_up import Up
from tests.observability.scrape import check_plane_after_demo
from tests.perf.conftest import perf_home  # noqa: F401  (the session's perf cache)

pytestmark = pytest.mark.slow


def test_demo_runs_the_journey_on_a_fresh_plane(tmp_path, perf_home):  # noqa: F811
    up = Up(tmp_path / "home", perf_home).start("--offline-hub")
    try:
        up.wait_ready(timeout=90)
        demo = subprocess.run([sys.executable, "-m", "wingsmith.cli.main", "demo"], env=up.env, capture_output=True,
                              text=True, timeout=300)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        out = demo.stdout
        for step in ("[1/6] resolve", "[2/6] register", "[3/6] approve", "[4/6] a workload", "[5/6] an endpoint",
                     "[6/6] one chat completion"):
            assert step in out
        assert "approved by local-reviewer" in out
        assert "sim-east serving" in out and "sim-west serving" in out
        assert "answered by sim-" in out and "Hello from demo-kimi-k3" in out
        # Every process exports what the journey did (the metrics families: tests/observability/scrape.py).
        up_out = up.out.read_text()
        assert f"worker http://127.0.0.1:{up.ports['metrics']}/metrics" in up_out, up_out
        check_plane_after_demo(up.api, f"http://127.0.0.1:{up.ports['metrics']}",
                               f"http://127.0.0.1:{up.ports['gateway']}", "demo-kimi-k3")
    finally:
        assert up.stop() == 0


def test_demo_under_a_team_token_table_finds_its_plane_from_plane_json(tmp_path, perf_home):  # noqa: F811
    """A team's WINGSMITH_AUTH_TOKENS: `up` registers its clusters as the table's admin, /readyz waits
    for them, and the CLI, told no URL at all, finds API, gateway and offline Hub in plane.json and
    approves as a different principal than the one who registered."""
    tokens = {"tok-ana": {"name": "ana", "roles": ["admin"]}, "tok-vic": {"name": "vic", "roles": ["viewer"]},
              "tok-bo": {"name": "bo", "roles": ["approver"]}}
    up = Up(tmp_path / "home", perf_home)
    up.env["WINGSMITH_AUTH_TOKENS"] = json.dumps(tokens)
    for name in ("WINGSMITH_API_URL", "WINGSMITH_GATEWAY_URL"):
        up.env.pop(name)
    up.start("--offline-hub")
    try:
        up.wait_ready(timeout=90)
        out = up.out.read_text()
        assert "unknown token" not in out and "registered sim-nvl (as ana)" in out
        ready = httpx.get(f"{up.api}/readyz", timeout=5).json()
        assert ready["checks"]["clusters"] == "ok"
        plane = json.loads((up.home / "plane.json").read_text())
        assert plane["api_url"] == up.api and plane["gateway_url"] == f"http://127.0.0.1:{up.ports['gateway']}"
        assert plane["hub_endpoint"] == f"http://127.0.0.1:{up.ports['hub']}"
        assert plane["temporal_ui_url"] == f"http://localhost:{up.ports['ui']}"

        cli_env = {"PATH": up.env["PATH"], "WINGSMITH_HOME": str(up.home),
                   "WINGSMITH_AUTH_TOKENS": json.dumps(tokens)}
        resolve = subprocess.run([sys.executable, "-m", "wingsmith.cli.main", "resolve", "hf:moonshotai/Kimi-K3"],
                                 env=cli_env, capture_output=True, text=True, timeout=120)
        assert resolve.returncode == 0, resolve.stdout + resolve.stderr
        demo = subprocess.run([sys.executable, "-m", "wingsmith.cli.main", "demo"], env=cli_env,
                              capture_output=True, text=True, timeout=300)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert "approved by bo" in demo.stdout and "Hello from demo-kimi-k3" in demo.stdout
    finally:
        assert up.stop() == 0

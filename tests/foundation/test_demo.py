"""`wingsmith demo` on a fresh `wingsmith up --offline-hub`: the whole seed journey, as a new user
runs it, ends with a chat completion through the gateway."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.foundation.test_up import Up
from tests.observability.scrape import check_plane_after_demo

pytestmark = pytest.mark.slow


def test_demo_runs_the_journey_on_a_fresh_plane(tmp_path):
    up = Up(tmp_path / "home").start("--offline-hub")
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
        assert "answered by sim-" in out and "Hello from kimi-k3" in out
        # Every process exports what the journey did (the metrics families: tests/observability/scrape.py).
        up_out = up.out.read_text()
        assert f"worker http://127.0.0.1:{up.ports['metrics']}/metrics" in up_out, up_out
        check_plane_after_demo(up.api, f"http://127.0.0.1:{up.ports['metrics']}",
                               f"http://127.0.0.1:{up.ports['gateway']}", "kimi-k3")
    finally:
        assert up.stop() == 0

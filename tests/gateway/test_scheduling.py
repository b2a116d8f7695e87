"""The gateway process asks the scheduler for a short time slice (gateway/scheduling.py): real
`python -m gateway` processes, their slice read from the kernel (/proc/<pid>/sched)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.scheduling import DEFAULT_SLICE_US, SLICE_ENV, current_slice_us, slice_us
from wingsmith.local.ports import free_port
from wingsmith.local.temporal_server import stop_process, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
# Where the kernel has custom slices (EEVDF, Linux 6.12+) it reports each task's; elsewhere the
# request is accepted or refused but nothing can be read back, and these tests check that it serves.
REPORTED = current_slice_us() is not None
# What a child of this test process runs on when it asks for nothing: its parent's slice, inherited.
INHERITED = current_slice_us()


@pytest.fixture
def start(tmp_path: Path, token_file: Path) -> Iterator:
    started: list[subprocess.Popen] = []

    def start(*flags: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        port = free_port()
        cmd = [sys.executable, "-m", "gateway", "--port", str(port), "--state-dir", str(tmp_path / "state"),
               "--admin-token-ref", f"file:{token_file}", *flags]
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stderr=subprocess.PIPE)
        started.append(proc)
        wait_for_port("127.0.0.1", port, 60, proc, "the gateway")
        return proc

    yield start
    for proc in started:
        stop_process(proc, 10)


def test_the_gateway_runs_on_the_short_slice_by_default(start):
    gateway = start()
    assert current_slice_us(gateway.pid) == (DEFAULT_SLICE_US if REPORTED else None)
    if REPORTED:
        assert INHERITED is not None and DEFAULT_SLICE_US < INHERITED  # shorter than it would have been


def test_the_slice_is_chosen_by_flag_or_environment_and_zero_keeps_the_kernels(start):
    assert current_slice_us(start("--sched-slice-us", "250").pid) == (250 if REPORTED else None)
    assert current_slice_us(start(env={SLICE_ENV: "600"}).pid) == (600 if REPORTED else None)
    assert current_slice_us(start("--sched-slice-us", "0").pid) == INHERITED


@pytest.mark.parametrize("value", ["50", "100001", "-1", "fast"])
def test_a_slice_out_of_the_kernels_range_is_refused_before_the_gateway_starts(tmp_path, token_file, value):
    done = subprocess.run([sys.executable, "-m", "gateway", "--port", str(free_port()), "--state-dir",
                           str(tmp_path / "state"), "--admin-token-ref", f"file:{token_file}",
                           "--sched-slice-us", value], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--sched-slice-us" in done.stderr and ("between 100 and 100000" in done.stderr
                                                 or "whole number" in done.stderr)


def test_asking_sets_the_slice_of_the_caller_and_leaves_its_parents():
    code = ("from gateway.scheduling import ask_for_slice, current_slice_us\n"
            "before = current_slice_us()\n"
            "print(ask_for_slice(300), before, current_slice_us())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    asked, before, after = out.stdout.split()
    assert asked == "True"
    assert (before, after) == ((str(INHERITED), "300") if REPORTED else ("None", "None"))
    assert current_slice_us() == INHERITED  # this process's own is untouched


def test_the_flags_values():
    assert slice_us("0") == 0 and slice_us("100") == 100 and slice_us("100000") == 100000
    for bad in ("99", "100001", "-5", "1.5", ""):
        with pytest.raises(ValueError):
            slice_us(bad)

"""A CLI command whose reader goes away (`wingsmith ... | head -1`) stops quietly: no
`BrokenPipeError` traceback, and the exit status a shell gives a command ended by SIGPIPE."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Commands that print without a running plane (the catalog ships with the repository).
COMMANDS = [["recipes", "show", "moonshotai/Kimi-K3"], ["recipes", "show", "deepseek-ai/DeepSeek-V3", "--hardware",
                                                           "h200"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_closed_pipe_prints_no_traceback(argv, tmp_path):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write meets a broken pipe
    env = {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_")}
    env["WINGSMITH_HOME"] = str(tmp_path)
    try:
        done = subprocess.run([sys.executable, "-m", "wingsmith.cli.main", *argv], stdout=write,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 141, done.stderr


"""A setting that does not parse stops the worker in one line (wingsmith/adapters/startup.py), exit 78 (EX_CONFIG:
restarting cannot help), naming the variable a person sets and what is wrong with it, never the value
(it may hold a password) and never a pydantic traceback. The process is the real `python -m worker`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from wingsmith.adapters.startup import EXIT_MISCONFIGURED, settings_failure
from wingsmith.domain.config import Settings

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-do-not-print"


def _worker(tmp_path: Path, module: str = "worker", **settings: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "WINGSMITH_", "DATABASE_URL"))}
    env.update(WINGSMITH_HOME=str(tmp_path), **settings)
    return subprocess.run([sys.executable, "-m", module], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


# The perf worker (its own process, `up` starts it with the perf extra) reads the same settings.
@pytest.mark.parametrize(("module", "process"), [("worker", "wingsmith worker"),
                                                 ("worker.perf", "wingsmith perf-worker")])
def test_a_bad_setting_stops_the_worker_in_one_line(tmp_path, module: str, process: str):
    done = _worker(tmp_path, module, WINGSMITH_WATCH_STATUS_SECONDS=SECRET, WINGSMITH_GATEWAY=f"{SECRET}-gw",
                   DATABASE_URL=f"postgresql://plane:{SECRET}@db.internal/wingsmith")
    assert done.returncode == EXIT_MISCONFIGURED, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{process}: bad configuration: "), lines[0]
    assert "WINGSMITH_WATCH_STATUS_SECONDS: Input should be a valid number" in lines[0]
    assert "WINGSMITH_GATEWAY: String should match pattern" in lines[0]
    assert SECRET not in done.stderr + done.stdout, "the values set are never printed"
    assert "Traceback" not in done.stderr and "pydantic" not in done.stderr


def test_settings_that_only_go_together_stop_it_with_their_own_words(tmp_path):
    done = _worker(tmp_path, TEMPORAL_DEPLOYMENT_NAME="wingsmith")
    assert done.returncode == EXIT_MISCONFIGURED, done.stderr
    assert done.stderr.strip() == ("wingsmith worker: bad configuration: TEMPORAL_DEPLOYMENT_NAME and "
                                   "TEMPORAL_WORKER_BUILD_ID go together: set both (a versioned worker) or neither")


@pytest.mark.parametrize(("given", "named"), [({"DATABASE_URL": 5}, "DATABASE_URL"),
                                              ({"oidc_leeway_seconds": -1}, "WINGSMITH_OIDC_LEEWAY_SECONDS")])
def test_a_setting_is_named_by_the_variable_a_person_sets(given, named):
    with pytest.raises(ValidationError) as caught:
        Settings(**given)
    failure = settings_failure(caught.value)
    assert failure.misconfigured and failure.exit_code == EXIT_MISCONFIGURED
    assert str(failure).startswith(f"bad configuration: {named}: "), str(failure)

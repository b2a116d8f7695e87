"""The API as deployed, `uvicorn api.main:app` in a process of its own on a real Postgres, with a
kubeconfig directory the tests write into: what the event loop suffers is measured from outside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from wingsmith.local.ports import free_port

TOKENS = {"tok-ada": {"name": "ada", "roles": ["admin"]}}
ADMIN = {"Authorization": "Bearer tok-ada"}


@dataclass(frozen=True)
class ApiProcess:
    url: str
    kubeconfigs: Path  # the API's WINGSMITH_KUBECONFIG_DIR


@pytest.fixture(scope="module")
def api_process(pg_dsn, tmp_path_factory) -> Iterator[ApiProcess]:
    root = tmp_path_factory.mktemp("kube-input")
    kubeconfigs = root / "kubeconfigs"
    kubeconfigs.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WINGSMITH_", "TEMPORAL_", "KUBECONFIG"))}
    env.update(DATABASE_URL=pg_dsn, WINGSMITH_AUTH_TOKENS=json.dumps(TOKENS), WINGSMITH_LOG_FORMAT="json",
               WINGSMITH_LOG_LEVEL="WARNING", WINGSMITH_HOME=str(root / "home"),
               WINGSMITH_KUBECONFIG_DIR=str(kubeconfigs),
               # The fleet kubeconfig's users run `aws eks get-token`, as an EKS fleet's do.
               WINGSMITH_KUBECONFIG_EXEC_ALLOW="aws")
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.main:app", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning", "--no-access-log"], env=env,
                            cwd=Path(__file__).resolve().parents[2])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the API did not start"
            time.sleep(0.1)
        yield ApiProcess(url, kubeconfigs)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

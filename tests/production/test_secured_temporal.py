"""The plane on a secured Temporal and an external Postgres (issue 33, section 1).

- The journey (register → approve → workload → endpoint → chat through the gateway) runs on `wingsmith up`
  pointed at a Temporal behind a TLS terminator that requires a client certificate: `up` starts no Temporal,
  and the API and worker take address, namespace and certificates from Temporal's own variables.
- A missing, foreign or unreadable client certificate stops the API, the worker, the perf worker and `up`
  at start in one line naming the address and the cause, within a bound.
- A temporal.toml profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE) works like the variables.
- DATABASE_URL's sslmode is asyncpg's: `require` on a server without TLS fails at once in one line,
  `disable` connects."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from tests.foundation.test_up import Up
from tests.perf.conftest import perf_home  # noqa: F401  (the session's perf cache)
from tests.production.tls import SERVER_NAME, Pki, make_pki, tls_terminator
from wingsmith.adapters.startup import EXIT_MISCONFIGURED
from wingsmith.adapters.store.db import open_pool
from wingsmith.adapters.temporal import TemporalConnectError, connect, workflow_ui_url
from wingsmith.domain.config import Settings
from wingsmith.local.ports import free_port

pytestmark = pytest.mark.slow

# The SDK's connect timeout is 10 s; a process that hangs on a refused handshake would blow well past this.
START_BOUND_SECONDS = 30


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def front(pki, temporal_server, tmp_path_factory):
    with tls_terminator(pki, temporal_server.address, tmp_path_factory.mktemp("haproxy")) as terminator:
        yield terminator


async def test_the_journey_runs_through_a_temporal_that_requires_a_client_certificate(
        tmp_path, pki, front, temporal_client, perf_home):  # noqa: F811
    up = Up(tmp_path / "home", perf_home)
    up.env.update(pki.client_env(front.address), TEMPORAL_NAMESPACE=temporal_client.namespace)
    before = front.forwarded_sessions()
    up.start("--offline-hub")
    try:
        await asyncio.to_thread(up.wait_ready, 120)
        out = up.out.read_text()
        assert f"temporal: using {front.address} (external" in out, out
        assert not (up.home / "temporal.db").exists()  # `up` started no Temporal of its own
        assert not any("start-dev" in " ".join(p.cmdline()) for p in up.descendants())
        demo = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "wingsmith.cli.main", "demo"],
                                       env=up.env, capture_output=True, text=True, timeout=300)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert "approved by local-reviewer" in demo.stdout
        assert "Hello from demo-kimi-k3" in demo.stdout
        # The workflows ran in the module's namespace, reached through the terminator only.
        workflows = [w.id async for w in temporal_client.list_workflows()]
        assert any(w.startswith("workload/") for w in workflows) and any(w.startswith("endpoint/") for w in workflows)
        assert front.forwarded_sessions() > before
    finally:
        assert up.stop() == 0


def _profile(pki: Pki, address: str, client: str, namespace: str = "default") -> str:
    return f"""[profile.production]
address = "{address}"
namespace = "{namespace}"

[profile.production.tls]
server_name = "{SERVER_NAME}"
server_ca_cert_path = "{pki.path('ca', 'pem')}"
client_cert_path = "{pki.path(client, 'pem')}"
client_key_path = "{pki.path(client, 'key')}"
"""


def _bad_client_envs(pki: Pki, address: str) -> dict[str, tuple[dict[str, str], str]]:
    """case -> (Temporal variables, what the one line must say)."""
    missing = pki.client_env(address)
    missing["TEMPORAL_TLS_CLIENT_CERT_PATH"] = str(pki.root / "absent.pem")
    toml = pki.root / "stranger.toml"
    toml.write_text(_profile(pki, address, "stranger"))
    return {"no client certificate": (pki.client_env(address, client=None), "requires a client certificate"),
            "a certificate from another CA": (pki.client_env(address, client="stranger"),
                                              "refused the client certificate"),
            "a certificate file that is not there": (missing, f"cannot read the client certificate "
                                                              f"{pki.root / 'absent.pem'}"),
            # No TEMPORAL_ADDRESS: the profile's address is the one tried (and `up` starts no Temporal).
            "a profile with a certificate from another CA": ({"TEMPORAL_CONFIG_FILE": str(toml),
                                                              "TEMPORAL_PROFILE": "production"},
                                                             "refused the client certificate")}


# kind (as the one line names the process) -> its command. The perf worker needs the perf extra (CI installs
# it): without it, it exits 2 saying so, and this test fails on that, as the perf tests do, never skips.
_PROCESSES = {"api": [sys.executable, "-m", "api"], "worker": [sys.executable, "-m", "worker"],
              "perf-worker": [sys.executable, "-m", "worker.perf"],
              "up": [sys.executable, "-m", "wingsmith.cli.main", "up"]}


def test_a_wrong_client_certificate_stops_api_workers_and_up_at_start_in_one_line(tmp_path, pki, front):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "WINGSMITH_", "DATABASE_URL"))}
    started: dict[tuple[str, str], tuple[subprocess.Popen, float, str]] = {}
    for case, (temporal_env, cause) in _bad_client_envs(pki, front.address).items():
        for kind, command in _PROCESSES.items():
            home = tmp_path / f"{kind}-{len(started)}"
            env = {**base, **temporal_env, "WINGSMITH_HOME": str(home), "WINGSMITH_API_PORT": str(free_port()),
                   "WINGSMITH_WORKER_METRICS_PORT": str(free_port()), "WINGSMITH_POSTGRES_PORT": str(free_port())}
            proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
            started[(case, kind)] = (proc, time.monotonic(), cause)
    try:
        for (case, kind), (proc, t0, cause) in started.items():
            out, err = proc.communicate(timeout=START_BOUND_SECONDS)
            took = time.monotonic() - t0
            assert proc.returncode == EXIT_MISCONFIGURED, f"{kind}, {case}: exit {proc.returncode}\n{out}\n{err}"
            lines = err.strip().splitlines()
            assert len(lines) == 1, f"{kind}, {case}: not one line:\n{err}"
            assert lines[0].startswith(f"wingsmith {kind}: cannot connect to Temporal at {front.address}: "), lines[0]
            assert cause in lines[0], lines[0]
            assert "Traceback" not in out + err and took < START_BOUND_SECONDS
    finally:
        for proc, _, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


async def test_a_temporal_toml_profile_carries_address_namespace_and_certificates(
        tmp_path, pki, front, temporal_client, monkeypatch):
    toml = tmp_path / "temporal.toml"
    production = _profile(pki, front.address, "client", temporal_client.namespace)
    toml.write_text(f'[profile.default]\naddress = "127.0.0.1:1"\n\n{production}')
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(toml))
    monkeypatch.setenv("TEMPORAL_PROFILE", "production")
    client = await connect(Settings())
    assert client.namespace == temporal_client.namespace
    assert client.service_client.config.target_host == front.address
    assert await client.service_client.check_health()
    assert f"/namespaces/{temporal_client.namespace}/workflows/" in workflow_ui_url(Settings(), "endpoint/x")

    monkeypatch.setenv("TEMPORAL_PROFILE", "staging")
    with pytest.raises(TemporalConnectError, match="client configuration cannot be loaded.*staging"):
        await connect(Settings())
    # A profile file that is not there (a Secret that did not mount) is an error, not an empty profile.
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "absent.toml"))
    with pytest.raises(TemporalConnectError, match="TEMPORAL_CONFIG_FILE names .*absent.toml"):
        await connect(Settings())


async def test_the_server_name_and_the_server_ca_are_checked(pki, front, monkeypatch):
    for name, value in pki.client_env(front.address).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TEMPORAL_TLS_SERVER_NAME", "elsewhere.test")
    with pytest.raises(TemporalConnectError, match="not valid for the name .*TEMPORAL_TLS_SERVER_NAME") as wrong:
        await connect(Settings())
    assert wrong.value.misconfigured
    monkeypatch.setenv("TEMPORAL_TLS_SERVER_NAME", SERVER_NAME)
    monkeypatch.setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", str(pki.path("stranger", "pem")))
    with pytest.raises(TemporalConnectError, match="not signed by a CA this client trusts"):
        await connect(Settings())


async def test_database_url_sslmode_is_honoured(pg_dsn):
    pool = await open_pool(f"{pg_dsn}?sslmode=disable", max_size=1)
    try:
        assert await pool.fetchval("select 1") == 1
    finally:
        await pool.close()
    # The test Postgres offers no TLS: `require` must fail, and at once, not after the restart wait.
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match="rejected SSL upgrade"):
        await open_pool(f"{pg_dsn}?sslmode=require", max_size=1, wait_seconds=30)
    assert time.monotonic() - t0 < 5


async def test_a_worker_with_an_unusable_database_url_stops_in_one_line(tmp_path, pg_dsn, temporal_server):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "WINGSMITH_"))}
    env.update(TEMPORAL_ADDRESS=temporal_server.address, DATABASE_URL=f"{pg_dsn}?sslmode=require",
               WINGSMITH_HOME=str(tmp_path), WINGSMITH_WORKER_METRICS_PORT=str(free_port()))
    t0 = time.monotonic()
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "worker"], env=env, capture_output=True,
                                   text=True, timeout=START_BOUND_SECONDS)
    assert done.returncode == EXIT_MISCONFIGURED, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wingsmith worker: cannot connect to Postgres (DATABASE_URL): "), \
        done.stderr
    assert "rejected SSL upgrade" in lines[0] and "sslmode" in lines[0]
    assert time.monotonic() - t0 < START_BOUND_SECONDS

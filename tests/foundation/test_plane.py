"""How a local plane is found and told apart: plane.json and the URL precedence of the CLI, the
token a CLI call uses (a different principal approves), ports that move URLs, /readyz waiting for
the clusters `up` started, and a child that dies at start saying why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from api.app import create_app
from api.auth import TokenTable
from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster
from wingsmith.cli import api_client, plane
from wingsmith.domain.config import Settings, get_settings
from wingsmith.local.supervisor import Plane, _start_child, write_plane_file
from wingsmith.local.tokens import holder_with, local_admin_tokens

TEAM = {"tok-vic": {"name": "vic", "roles": ["viewer"]}, "tok-ana": {"name": "ana", "roles": ["admin"]},
        "tok-bo": {"name": "bo", "roles": ["approver"]}, "tok-ola": {"name": "ola", "roles": ["operator"]}}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("WINGSMITH_HOME", str(tmp_path))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _record(home, **addresses) -> None:
    (home / "plane.json").write_text(json.dumps(addresses))


def test_ports_alone_move_the_gateway_and_ui_urls(monkeypatch):
    monkeypatch.setenv("WINGSMITH_GATEWAY_PORT", "18080")
    monkeypatch.setenv("WINGSMITH_TEMPORAL_UI_PORT", "18233")
    s = Settings()
    assert (s.gateway_url, s.temporal_ui_url) == ("http://127.0.0.1:18080", "http://localhost:18233")
    assert Settings(gateway_url="http://gw.example/", temporal_ui_url="http://ui").gateway_url == "http://gw.example"


def test_the_cli_prefers_flags_then_settings_then_plane_json(home, monkeypatch):
    monkeypatch.setenv("WINGSMITH_API_PORT", "18000")
    assert plane.api_url() == "http://127.0.0.1:18000"  # no plane recorded: the port
    _record(home, api_url="http://127.0.0.1:28000", gateway_url="http://127.0.0.1:28080",
            hub_endpoint="http://127.0.0.1:28090")
    get_settings.cache_clear()
    assert plane.api_url() == "http://127.0.0.1:28000"  # the recorded plane beats a guessed default
    assert plane.gateway_url() == "http://127.0.0.1:28080" and plane.hub_endpoint() == "http://127.0.0.1:28090"
    assert plane.api_url("http://flag:1/") == "http://flag:1" and plane.gateway_url("http://gw:2") == "http://gw:2"
    monkeypatch.setenv("WINGSMITH_API_URL", "http://env:3")
    monkeypatch.setenv("WINGSMITH_HF_ENDPOINT", "https://huggingface.co")
    monkeypatch.setenv("WINGSMITH_GATEWAY_PORT", "38080")  # a port is a setting too
    get_settings.cache_clear()
    assert plane.api_url() == "http://env:3" and plane.hub_endpoint() == "https://huggingface.co"
    assert plane.gateway_url() == "http://127.0.0.1:28080"  # only WINGSMITH_GATEWAY_URL overrides the record


def test_up_records_the_addresses_it_serves(home):
    s = Settings(home=home, temporal_ui_port=18233)
    path = write_plane_file(s, "http://127.0.0.1:18000", {
        "TEMPORAL_ADDRESS": "127.0.0.1:17233", "WINGSMITH_HF_ENDPOINT": "http://127.0.0.1:18090",
        "WINGSMITH_GATEWAY_URL": "http://127.0.0.1:18080", "WINGSMITH_TEMPORAL_UI_URL": s.temporal_ui_url})
    assert json.loads(path.read_text()) | {"pid": 0} == {
        "api_url": "http://127.0.0.1:18000", "gateway_url": "http://127.0.0.1:18080",
        "hub_endpoint": "http://127.0.0.1:18090", "temporal_address": "127.0.0.1:17233",
        "temporal_namespace": "default", "temporal_ui_url": "http://localhost:18233", "pid": 0}


def test_a_team_table_gives_an_admin_to_up_and_a_different_approver_to_the_cli(home, monkeypatch):
    monkeypatch.setenv("WINGSMITH_AUTH_TOKENS", json.dumps(TEAM))
    get_settings.cache_clear()
    assert holder_with(get_settings(), "admin").name == "ana"
    assert api_client.token("operator") == "tok-ola"  # the operator registers and operates
    assert api_client.token("approver") == "tok-bo"  # someone else approves
    monkeypatch.setenv("WINGSMITH_AUTH_TOKENS", json.dumps({k: TEAM[k] for k in ("tok-ana", "tok-bo")}))
    get_settings.cache_clear()
    assert (api_client.token("operator"), api_client.token("approver")) == ("tok-ana", "tok-bo")
    monkeypatch.setenv("WINGSMITH_APPROVER_TOKEN", "tok-explicit")
    assert api_client.token("approver") == "tok-explicit"


def test_local_tokens_serve_the_cli_when_no_team_table_is_set(home):
    table = json.loads(local_admin_tokens(get_settings().tokens_file))
    admin, reviewer = list(table)
    assert (api_client.token("operator"), api_client.token("approver")) == (admin, reviewer)


def test_a_child_that_dies_at_start_says_why_and_where(tmp_path):
    p = Plane(settings=Settings(home=tmp_path), offline_hub=False)
    code = "import sys; print('reading CRDs'); print('FileNotFoundError: no CRD files in /x', flush=True); sys.exit(3)"
    with pytest.raises(RuntimeError) as err:
        _start_child(p, "simulated-clusters", [sys.executable, "-c", code], port=1)
    message = str(err.value)
    assert "simulated-clusters exited with 3 before listening on 1" in message
    assert "FileNotFoundError: no CRD files in /x" in message
    assert str(tmp_path / "logs" / "simulated-clusters.log") in message


@pytest_asyncio.fixture(loop_scope="session")
async def api(pg_pool, temporal_client, tmp_path):
    await pg_pool.execute("delete from clusters")
    settings = Settings(home=tmp_path, auth_tokens=json.dumps(TEAM), expected_clusters="sim-east,sim-west")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool, temporal=temporal_client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


async def test_readyz_waits_for_the_clusters_up_started(api, pg_pool):
    r = await api.get("/readyz")
    assert r.status_code == 503 and r.json()["checks"]["clusters"] == "pending registration: sim-east, sim-west"
    await create_cluster(pg_pool, ClusterSpec(name="sim-east", kubeconfig="/k", kube_context="sim-east"))
    assert (await api.get("/readyz")).json()["checks"]["clusters"] == "pending registration: sim-west"
    await create_cluster(pg_pool, ClusterSpec(name="sim-west", kubeconfig="/k", kube_context="sim-west"))
    r = await api.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"] == {"postgres": "ok", "temporal": "ok", "clusters": "ok"}


def test_the_suite_ignores_plane_settings_exported_in_the_shell(tmp_path):
    """A shell with a plane's settings exported (here the UI URL that once broke the codec's CORS
    tests, a database and a Temporal that do not exist) runs the tests as a clean one does."""
    env = {**os.environ, "WINGSMITH_TEMPORAL_UI_URL": "http://elsewhere:9999", "WINGSMITH_API_PORT": "1",
           "WINGSMITH_AUTH_TOKENS": "not json", "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
           "TEMPORAL_ADDRESS": "127.0.0.1:1", "WINGSMITH_HOME": str(tmp_path),
           # Temporal's own client configuration is the plane's too (a certificate, a profile file).
           "TEMPORAL_TLS_CLIENT_CERT_PATH": str(tmp_path / "absent.pem"),
           "TEMPORAL_CONFIG_FILE": str(tmp_path / "absent.toml")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/secret_scan/test_codec.py"], env=env, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]

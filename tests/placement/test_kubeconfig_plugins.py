"""No code runs from a kubeconfig: a user with an `exec:` credential plugin or an `auth-provider:` is
refused at registration and by the client factory, unless the plane operator allows its command by name
in the process's own settings (WINGSMITH_KUBECONFIG_EXEC_ALLOW; nothing a request sends can);
and what the kubernetes client logs about a failing plugin never carries the plugin's output."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
import yaml

from api.app import create_app
from api.auth import TokenTable
from wingsmith.adapters.kube import KubeconfigRef, KubeError, new_api_client
from wingsmith.adapters.kube.kubeconfig import KubeconfigPolicy
from wingsmith.domain.config import Settings

TOKENS = {"tok-admin": {"name": "ada", "roles": ["admin"]}}
ADMIN = {"Authorization": "Bearer tok-admin"}
LEAKED = "gateway-admin-token-printed-by-a-plugin"


def kubeconfig(tmp_path: Path, user: dict, name: str = "kubeconfig") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": user}]}))
    return path


def plugin(tmp_path: Path) -> tuple[Path, Path]:
    """An exec plugin that leaves a mark when it runs, prints a secret on stderr and fails."""
    mark = tmp_path / "plugin-ran"
    script = tmp_path / "leaky-plugin"
    script.write_text(f"#!/bin/sh\ntouch {mark}\necho '{LEAKED}' >&2\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, mark


def exec_user(script: Path) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script),
                     "interactiveMode": "Never"}}


def test_the_client_factory_refuses_an_exec_plugin_without_running_it(tmp_path, monkeypatch):
    monkeypatch.delenv("WINGSMITH_KUBECONFIG_EXEC_ALLOW", raising=False)
    script, mark = plugin(tmp_path)
    path = kubeconfig(tmp_path, exec_user(script))
    with pytest.raises(KubeError) as err:
        new_api_client(KubeconfigRef(source=str(path)))
    assert err.value.type == "KubeconfigExecRefused" and "leaky-plugin" in err.value.message
    assert not mark.exists()


def test_an_auth_provider_is_refused_too(tmp_path):
    path = kubeconfig(tmp_path, {"auth-provider": {"name": "gcp", "config": {"cmd-path": "/bin/true"}}})
    with pytest.raises(KubeError) as err:
        new_api_client(KubeconfigRef(source=str(path)), policy=KubeconfigPolicy(directory=tmp_path))
    assert err.value.type == "KubeconfigExecRefused" and "gcp" in err.value.message


def test_an_allowed_plugin_runs_but_its_output_stays_out_of_logs_and_errors(tmp_path, monkeypatch, caplog):
    script, mark = plugin(tmp_path)
    path = kubeconfig(tmp_path, exec_user(script))
    monkeypatch.setenv("WINGSMITH_KUBECONFIG_EXEC_ALLOW", "aws, leaky-plugin")
    caplog.set_level(logging.DEBUG)
    try:
        client = new_api_client(KubeconfigRef(source=str(path)))
        client.close()
    except KubeError as exc:
        assert LEAKED not in str(exc)
    assert mark.exists()  # allowed by name, so it ran
    assert caplog.records, "the kubernetes client logged nothing about the failing plugin"
    assert all(LEAKED not in r.getMessage() for r in caplog.records)


@pytest_asyncio.fixture(loop_scope="session")
async def api(pg_pool, tmp_path):
    settings = Settings(home=tmp_path / "home", auth_tokens=json.dumps(TOKENS), log_format="json",
                        kubeconfig_exec_allow="aws-iam-authenticator")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


async def test_registration_refuses_a_kubeconfig_that_runs_a_program(api, tmp_path, pg_pool):
    script, mark = plugin(tmp_path)
    path = kubeconfig(tmp_path, exec_user(script))
    r = await api.post("/v1/clusters", json={"name": "leaky", "kubeconfig": str(path)}, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "kubeconfig_exec_refused"
    assert "WINGSMITH_KUBECONFIG_EXEC_ALLOW" in r.json()["error"]["message"]
    assert await pg_pool.fetchval("select count(*) from clusters where name = 'leaky'") == 0
    assert not mark.exists()

    allowed = kubeconfig(tmp_path, {"exec": {"command": "/usr/local/bin/aws-iam-authenticator"}}, "allowed")
    r = await api.post("/v1/clusters", json={"name": "eks", "kubeconfig": str(allowed)}, headers=ADMIN)
    assert r.status_code == 201, r.text
    plain = kubeconfig(tmp_path, {"token": "not-a-plugin"}, "plain")
    r = await api.post("/v1/clusters", json={"name": "plain", "kubeconfig": str(plain)}, headers=ADMIN)
    assert r.status_code == 201, r.text

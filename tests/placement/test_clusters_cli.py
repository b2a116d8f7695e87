"""`wingsmith clusters ...` against a real API server (uvicorn on a loopback port, real Postgres)."""

from __future__ import annotations

import json
import re
import threading
import time

import httpx
import pytest
import uvicorn

from api.app import create_app
from wingsmith.cli.main import build_parser
from wingsmith.domain.config import Settings
from wingsmith.local.ports import free_port

TOKENS = {"tok-admin": {"name": "ada", "roles": ["admin"]}, "tok-view": {"name": "vic", "roles": ["viewer"]}}


@pytest.fixture(scope="module")
def api_url(pg_dsn, tmp_path_factory):
    settings = Settings(home=tmp_path_factory.mktemp("home"), database_url=pg_dsn,
                        auth_tokens=json.dumps(TOKENS), log_format="json", log_level="WARNING")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(url + "/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    yield url
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def cli(api_url, monkeypatch, capsys):
    monkeypatch.setenv("WINGSMITH_API_URL", api_url)

    def run(*argv: str, token: str = "tok-admin") -> tuple[int, str, str]:
        monkeypatch.setenv("WINGSMITH_TOKEN", token)
        args = build_parser().parse_args(["clusters", *argv])
        code = args.func(args)
        out, err = capsys.readouterr()
        return code, out, err
    return run


def test_add_list_show_cordon_remove(cli):
    code, out, err = cli("add", "gpu-west", "--kubeconfig", "env:KUBECONFIG_WEST", "--context", "west",
                         "--region", "us-west", "--label", "tier=gold", "--frontend-url", "http://west:8000",
                         "--manual", "h200=4", "--manual", "gb200=16x4")
    assert code == 0, err
    assert "registered gpu-west" in out and "manual: h200 4x8, gb200 16x4" in out
    assert cli("add", "gpu-east", "--kubeconfig", "env:KUBECONFIG_EAST")[0] == 0

    code, out, _ = cli("list", token="tok-view")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "REGION", "CORDONED", "INVENTORY", "CONTEXT", "LABELS"]
    assert lines[1].split()[:3] == ["gpu-east", "-", "no"] and lines[2].split()[:3] == ["gpu-west", "us-west", "no"]

    code, out, _ = cli("list", "--json", token="tok-view")
    assert [c["name"] for c in json.loads(out)["clusters"]] == ["gpu-east", "gpu-west"]

    assert cli("cordon", "gpu-west")[1].strip() == "cordoned gpu-west"
    code, out, _ = cli("show", "gpu-west", "--json", token="tok-view")
    shown = json.loads(out)
    assert shown["cordoned"] is True and shown["kube_context"] == "west"
    assert shown["manual_inventory"]["pools"][1] == {"hardware": "gb200", "gpus_per_node": 4, "nodes": 16,
                                                     "free_gpus": None}
    assert cli("uncordon", "gpu-west")[0] == 0
    assert re.search(r"^cordoned +no$", cli("show", "gpu-west")[1], re.M)

    assert cli("remove", "gpu-east")[1].strip() == "removed gpu-east"
    code, _, err = cli("show", "gpu-east")
    assert code == 3 and "'gpu-east' is not registered" in err


def test_errors_are_clear_and_have_exit_codes(cli, api_url):
    code, _, err = cli("add", "x", "--kubeconfig", "env:KUBECONFIG_K", token="tok-view")
    assert code == 4 and "lacks the admin role" in err
    code, _, err = cli("add", "x", "--kubeconfig", "env:KUBECONFIG_K", "--manual", "h200:4")
    assert code == 2 and "--manual 'h200:4' must look like HW=NODES" in err
    code, _, err = cli("add", "Bad_Name", "--kubeconfig", "env:KUBECONFIG_K")
    assert code == 2 and "DNS-1123" in err
    assert cli("add", "dup", "--kubeconfig", "env:KUBECONFIG_K")[0] == 0
    code, _, err = cli("add", "dup", "--kubeconfig", "env:KUBECONFIG_OTHER")
    assert code == 5 and "different settings" in err
    code, _, err = cli("add", "x", "--kubeconfig", "/etc/k/a.yaml:/etc/k/b.yaml")
    assert code == 2 and "path list" in err
    code, _, err = cli("list", "--api", "http://127.0.0.1:1")
    assert code == 1 and "not reachable" in err

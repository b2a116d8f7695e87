"""Secrets never leave by the back door. The whole journey runs with a Hugging Face token (by
reference) for a gated repo and a kubeconfig (by path) whose users carry a bearer token and a client
key; then every workflow history of the namespace, every log line of the worker and the API, every
registry row and every object the plane wrote to the clusters is exported and searched for each
secret, in the clear and base64-encoded at any alignment.

A scan of nothing would pass, so the test first proves the secrets were used: the gated repo's files
open only for that token, the emulator answers only that bearer token, and the kubernetes client
loaded that client key."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import ssl

import httpx
from kubernetes.config import kube_config

from tests.secret_scan.scan import find_secrets, history_export, secret_forms
from tests.support import running_worker, wait_until
from tests.workloads.conftest import KIMI, as_, dgds
from tests.workloads.test_workload_journey import _until_stage
from wingsmith.adapters.kube import KubeconfigRef
from wingsmith.adapters.kube.client import new_api_client
from wingsmith.adapters.logs import configure_logging


def test_the_scanner_finds_a_secret_inside_base64_at_every_alignment():
    secret = "hf_ScannerSelfTest0123456789"
    for prefix_len in range(6):
        blob = "x" * prefix_len + json.dumps({"token": secret}) + "tail"
        for encoded in (base64.b64encode(blob.encode()).decode(), base64.urlsafe_b64encode(blob.encode()).decode()):
            assert find_secrets(f"...{encoded}...", {"hf": secret}) == {"hf": [f for f in secret_forms(secret)
                                                                               if f in encoded]}
            assert find_secrets(encoded, {"hf": secret})
    assert find_secrets(base64.b64encode(b"hf_SomethingElse0123456789").decode(), {"hf": secret}) == {}


class _Captured:
    """Every log record of this process (worker and API run in-process), rendered by the plane's
    own formatter into a buffer, at DEBUG so that nothing is filtered away before the scan."""

    def __enter__(self):
        configure_logging("INFO", "json")
        root = logging.getLogger()
        self.buffer = io.StringIO()
        self.handler = logging.StreamHandler(self.buffer)
        self.handler.setFormatter(root.handlers[0].formatter if root.handlers else None)
        self.level = root.level
        root.addHandler(self.handler)
        root.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *_exc):
        root = logging.getLogger()
        root.removeHandler(self.handler)
        root.setLevel(self.level)

    @property
    def text(self) -> str:
        return self.buffer.getvalue()


async def _export_histories(client) -> dict[str, str]:
    exported = {}
    async for execution in client.list_workflows():
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        exported[f"{execution.id}@{execution.run_id}"] = history_export((await handle.fetch_history()).to_json())
    return exported


async def _export_registry(pool) -> str:
    tables = await pool.fetch("select table_name from information_schema.tables where table_schema = 'public'")
    rows = []
    for table in tables:
        rows += [r[0] for r in await pool.fetch(f'select row_to_json(t)::text from "{table["table_name"]}" t')]
    return "\n".join(rows)


async def test_journey_leaves_no_secret_in_histories_logs_registry_or_clusters(
        api, deps, settings, temporal_client, hub, clusters, kube_credentials, gateway, pg_pool, capfd):
    secrets = {"hf token": settings_token(settings),
               "client key": kube_credentials["key_pem"],
               "client key data": base64.b64encode(kube_credentials["key_pem"]).decode(),
               # The PEM's base64 body, line by line: any one line is enough to betray the key.
               **{f"client key line {i}": line for i, line in enumerate(_pem_lines(kube_credentials["key_pem"]))},
               **{f"kube token {name}": token for name, token in kube_credentials["tokens"].items()}}

    with _Captured() as logs:
        # Register, review and approve Kimi-K3 (the artifact workflow), through the API.
        r = await api.post("/v1/artifacts", json={"source": f"hf:{KIMI}"}, headers=as_("tok-olga"))
        assert r.status_code in (200, 202), r.text
        artifact = r.json()["id"]
        async with running_worker(temporal_client, deps):
            async def draft():
                got = (await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()
                return got if got.get("state") == "draft" else None
            drafted = await wait_until(draft, timeout=60, what="the Kimi-K3 draft")
            r = await api.post(f"/v1/artifacts/{artifact}/review", headers=as_("tok-ana"),
                               json={"decision": "approve", "draft_version": drafted.get("draft_version", 1)})
            assert r.status_code in (200, 202), r.text

            # A workload on the simulated clusters, then an endpoint in front of it.
            r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
                "artifact_id": artifact, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 2,
                "name": "kimi-scan", "served_model_name": "kimi-k3"})
            assert r.status_code == 202, r.text
            live = await _until_stage(api, "kimi-scan", {"serving", "failed"})
            assert live["stage"] == "serving", live
            r = await api.post("/v1/endpoints", headers=as_("tok-olga"),
                               json={"name": "kimi-k3", "workloads": ["kimi-scan"]})
            assert r.status_code == 202, r.text

            async def routed():
                route = gateway.client.get_route("kimi-k3")
                return route if route and route.serving else None
            await wait_until(routed, timeout=30, what="the endpoint's gateway route")
            answer = await asyncio.to_thread(httpx.post, f"{gateway.url}/v1/chat/completions", timeout=10, json={
                "model": "kimi-k3", "messages": [{"role": "user", "content": "hello"}]})
            assert answer.status_code == 200, answer.text

    # The secrets were really used, so a clean scan means something.
    kimi_file = f"{hub.url}/{KIMI}/resolve/main/config.json"
    anonymous = await asyncio.to_thread(httpx.head, kimi_file)
    assert anonymous.status_code in (401, 403), "Kimi-K3 must be gated for this test"
    granted = await asyncio.to_thread(httpx.head, kimi_file, headers={"Authorization": f"Bearer {secrets['hf token']}"})
    assert granted.status_code == 200
    assert hub.request_count(KIMI) > 0
    east = clusters.cluster("sim-east").server_url
    trusting = ssl.create_default_context(cafile=str(clusters.ca_file))  # the emulator's API is HTTPS
    unauthenticated = await asyncio.to_thread(httpx.get, f"{east}/api/v1/namespaces", verify=trusting)
    assert unauthenticated.status_code == 401, "the emulator must check bearer tokens"
    assert dgds(clusters, "kimi-scan"), "the plane wrote to the clusters with the kubeconfig's token"
    # The emulator asks for no client certificate, so the kubernetes client sends none; what
    # can be shown is that the file the plane was pointed at, as the client parses it, carries the key.
    new_api_client(KubeconfigRef(source=str(kube_credentials["path"]), context="sim-east"))
    loader = kube_config._get_kube_config_loader(filename=str(kube_credentials["path"]), active_context="sim-east")
    assert base64.b64decode(loader._user["client-key-data"]) == kube_credentials["key_pem"]

    # Export everything, and check the exports are not empty by finding what should be there.
    histories = await _export_histories(temporal_client)
    kinds = {wid.split("/")[0] for wid in histories}
    assert {"artifact", "workload", "endpoint"} <= kinds, sorted(histories)
    assert any("/cluster/" in wid for wid in histories), sorted(histories)
    assert all(KIMI in text for wid, text in histories.items() if wid.startswith("artifact/"))
    captured = capfd.readouterr()
    log_text = "\n".join([logs.text, captured.out, captured.err])
    assert "kimi-scan" in logs.text and len(logs.text.splitlines()) > 20, logs.text[-2000:]
    registry = await _export_registry(pg_pool)
    assert "kimi-scan" in registry and str(kube_credentials["path"]) in registry
    objects = json.dumps({name: clusters.cluster(name).dgds() for name in clusters.names})
    assert "kimi-scan" in objects

    leaks = {f"history {wid}": found for wid, text in histories.items() if (found := find_secrets(text, secrets))}
    for where, text in (("logs", log_text), ("registry", registry), ("cluster objects", objects)):
        if found := find_secrets(text, secrets):
            leaks[where] = found
    assert not leaks, {where: sorted(names) for where, names in leaks.items()}


def settings_token(settings) -> str:
    from wingsmith.adapters.secrets import read_secret_ref
    token = read_secret_ref(settings.hf_token_ref)
    assert token.startswith("hf_") and len(token) > 20
    return token


def _pem_lines(pem: bytes) -> list[str]:
    return [line for line in pem.decode().splitlines() if line and not line.startswith("-----")]

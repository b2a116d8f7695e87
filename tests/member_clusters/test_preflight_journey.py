"""Done when (issue 51): registering a simulated cluster without the Dynamo CRDs, with a Role lacking `patch`
on DynamoGraphDeployments, or without the Hub token Secret shows each failing line with its fix in the
API's answer, the CLI and the console, and placement skips the cluster saying why; after the fix,
`clusters check` passes and the cluster takes replicas.

A real plane: the API (uvicorn on a loopback port, in this test's event loop), a worker on this test's task
queues (the checks run on its kube queue: the API loads no kubeconfig), Temporal, Postgres, and simulated
clusters over HTTPS."""

from __future__ import annotations

import asyncio
import json
import re
from html import unescape

import httpx
import pytest
import pytest_asyncio
import uvicorn
from kubernetes import client as k8s

from api.app import create_app
from api.auth import TokenTable
from contracts import cluster_check as contract
from contracts.cluster_check import ClusterCheckInput
from sim.kube import ClusterSpec, NodePool, SimulatedClusters
from sim.kube.access import PolicyRule
from sim.kube.setup import ClusterSetup
from tests.conftest import unique_queue
from tests.console.conftest import sign_in
from tests.support import record_history_if_asked, running_worker, wait_for_pollers
from wingsmith.cli.main import build_parser
from wingsmith.domain.config import Settings, get_settings
from wingsmith.domain.kube_ref import KubeconfigRef
from wingsmith.domain.member_clusters import Preflight, rbac_manifests
from wingsmith.local.ports import free_port
from worker.registry import WorkerDeps

TOKENS = {"tok-admin": {"name": "ada", "roles": ["admin"]}, "tok-view": {"name": "vic", "roles": ["viewer"]}}
ADMIN, VIEWER = {"Authorization": "Bearer tok-admin"}, {"Authorization": "Bearer tok-view"}
FULL_ROLE = [PolicyRule.model_validate(rule) for doc in rbac_manifests("default", "hf-token")
             if doc["kind"] in ("Role", "ClusterRole") for rule in doc["rules"]]
NO_PATCH = [r.model_copy(update={"verbs": [v for v in r.verbs if v != "patch"]})
            if r.resources == ["dynamographdeployments"] else r for r in FULL_ROLE]
PLAN = {"hardware": "h200", "gpus_per_node": 8, "replicas": 1}


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    specs = [ClusterSpec(name="east-no-crds", region="us-east", node_pools=[NodePool.of("h200", 2)],
                         setup=ClusterSetup(dynamo_crds="none")),
             ClusterSpec(name="east-no-patch", region="us-east", node_pools=[NodePool.of("h200", 2)],
                         setup=ClusterSetup(role=NO_PATCH)),
             ClusterSpec(name="east-no-secret", region="us-east", node_pools=[NodePool.of("h200", 2)],
                         hf_token_secret=None)]
    with SimulatedClusters(specs, home=tmp_path_factory.mktemp("sim"), operator_delay=0.05) as clusters:
        yield clusters


@pytest_asyncio.fixture(loop_scope="session")
async def plane(pg_pool, temporal_client, tmp_path, monkeypatch):
    await pg_pool.execute("delete from clusters")
    queue = unique_queue("preflight")
    settings = Settings(home=tmp_path / "home", task_queue=queue, kube_task_queue=queue + "-kube",
                        auth_tokens=json.dumps(TOKENS), log_format="json", log_level="WARNING")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool, temporal=temporal_client)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes readiness only as a flag
            await asyncio.sleep(0.02)
        url = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("WINGSMITH_API_URL", url)
        get_settings.cache_clear()
        async with running_worker(temporal_client, WorkerDeps(settings=settings, db=pg_pool)):
            await wait_for_pollers(temporal_client, settings)
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                client.settings = settings  # type: ignore[attr-defined]
                yield client
    finally:
        server.should_exit = True
        await serving
        get_settings.cache_clear()


def cli(*argv: str, token: str = "tok-admin") -> tuple[int, str]:
    """`wingsmith clusters ...` as a person runs it (in a thread: it blocks on HTTP to the API above)."""
    import contextlib
    import io
    import os
    before = os.environ.get("WINGSMITH_TOKEN")
    os.environ["WINGSMITH_TOKEN"] = token
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            args = build_parser().parse_args(["clusters", *argv])
            code = args.func(args)
    finally:
        if before is None:
            os.environ.pop("WINGSMITH_TOKEN", None)
        else:
            os.environ["WINGSMITH_TOKEN"] = before
    return code, out.getvalue()


def register_body(sims, name: str) -> dict:
    return {"name": name, "region": "us-east", "kubeconfig": str(sims.kubeconfig_path), "kube_context": name,
            "frontend_base_url": f"{sims.base_url}/frontends/{name}"}


def failing(answer: dict) -> dict[str, str]:
    return {line["check"]: line["fix"] for line in answer["preflight"]["lines"] if line["status"] == "fail"}


async def dry_run(api: httpx.AsyncClient, name: str) -> dict:
    r = await api.post("/v1/placements/dry-run", headers=VIEWER, json={"plan": {
        **PLAN, "constraints": {"allowed_clusters": [name]}}, "explain": [name]})
    assert r.status_code == 200, r.text
    return r.json()["decision"]


async def test_a_cluster_missing_a_piece_is_registered_unplaceable_until_fixed(plane, sims, temporal_client):
    api = plane
    expected = {"east-no-crds": "dynamo_crds", "east-no-patch": "permission:dynamographdeployments.nvidia.com",
                "east-no-secret": "hub_token_secret"}
    # Registration answers the checklist: the one missing piece fails, with what to do.
    for name, check in expected.items():
        r = await api.post("/v1/clusters", headers=ADMIN, json=register_body(sims, name))
        assert r.status_code == 201, r.text
        answer = r.json()
        assert answer["check_not_run"] is None, answer
        assert list(failing(answer)) == [check], answer["preflight"]
    assert "helm" in failing((await api.get("/v1/clusters/east-no-crds", headers=VIEWER)).json())["dynamo_crds"]
    assert failing((await api.get("/v1/clusters/east-no-secret", headers=VIEWER)).json())["hub_token_secret"] == \
        "kubectl -n default create secret generic hf-token --from-literal=HF_TOKEN=<token>"

    # Placement skips each, saying why (the live inventory is read, and has room).
    for name, check in expected.items():
        decision = await dry_run(api, name)
        assert decision["placed"] == 0, decision
        verdict = decision["clusters"][0]
        first = next(f for f in verdict["filters"] if not f["passed"])
        assert first["name"] == "preflight" and f"{check}:" in first["reason"], first
        assert "wingsmith clusters check" in first["reason"]
        assert f"filtered out by preflight: its preflight check failed ({check}:" in decision["summary"]
        assert all(f["passed"] for f in verdict["filters"] if f["name"] in ("inventory", "capacity")), verdict

    # The CLI: the checklist with each fix, and exit 1 while a check fails.
    code, out = await asyncio.to_thread(cli, "check", "east-no-patch")
    assert code == 1, out
    assert "FAILED: 1 check(s) failed; the cluster takes no replicas until a check passes" in out
    assert re.search(r"FAIL +permission:dynamographdeployments\.nvidia\.com: the plane's user may not patch", out), out
    assert "fix: grant it: apply the Role and ClusterRole" in out
    code, out = await asyncio.to_thread(cli, "show", "east-no-crds", token="tok-view")
    assert code == 0 and "FAIL  dynamo_crds: DynamoGraphDeployment (dynamographdeployments.nvidia.com) is not " \
                          "installed" in out, out

    # The console: the checklist on the cluster's page, each fix beside its line.
    async with httpx.AsyncClient(base_url=str(api.base_url)) as browser:
        await sign_in(browser, "tok-view")
        page = await browser.get("/console/clusters/east-no-secret")
        assert page.status_code == 200, page.text
        row = re.search(r'<tr data-check="hub_token_secret" data-status="fail">(.*?)</tr>', page.text, re.S)
        assert row and "kubectl -n default create secret generic hf-token" in unescape(row[1]), page.text
        assert "takes no replicas" in page.text and "Check again" not in page.text  # a viewer may not check
        fleet = unescape((await browser.get("/console/clusters")).text)
        assert "its preflight failed (hub_token_secret): it takes no replicas until a check passes" in fleet

    # Fix each cluster; `clusters check` passes and the cluster takes replicas.
    sims.setup("east-no-crds").dynamo_crds = "current"
    sims.setup("east-no-patch").role = FULL_ROLE
    await asyncio.to_thread(k8s.CoreV1Api(sims.api_client("east-no-secret")).create_namespaced_secret, "default",
                            {"metadata": {"name": "hf-token"}, "stringData": {"HF_TOKEN": "hf_x"}})
    for name in ("east-no-crds", "east-no-patch"):
        code, out = await asyncio.to_thread(cli, "check", name)
        assert code == 0 and "passed: the cluster may take replicas" in out, out
    async with httpx.AsyncClient(base_url=str(api.base_url)) as browser:  # and from the console, as an admin
        await sign_in(browser, "tok-admin")
        page = await browser.get("/console/clusters/east-no-secret")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)[1]
        checked = await browser.post("/console/clusters/east-no-secret/check", data={"csrf": csrf})
        assert checked.status_code == 200 and 'id="preflight-verdict"' in checked.text, checked.text
        assert "it may take replicas" in checked.text and 'data-status="fail"' not in checked.text
    for name in expected:
        decision = await dry_run(api, name)
        assert decision["replicas"] == {name: 1}, decision
        passed = {"name": "preflight", "passed": True,
                  "reason": "its last preflight check passed, or it was never checked"}
        assert passed in decision["clusters"][0]["filters"]

    # The workflow the API starts, as tests/histories/cluster_check.json records it (WINGSMITH_RECORD_HISTORIES=1).
    settings = plane.settings  # type: ignore[attr-defined]
    run_id = "cluster-check/east-no-patch/recorded"
    preflight = await temporal_client.execute_workflow(
        contract.WORKFLOW, ClusterCheckInput(cluster="east-no-patch", kubeconfig=KubeconfigRef(
            source=str(sims.kubeconfig_path), context="east-no-patch"), namespace="default",
            hf_token_secret="hf-token", kube_task_queue=settings.kube_task_queue),
        id=run_id, task_queue=settings.task_queue, result_type=Preflight)
    assert preflight.passed, preflight.failed
    await record_history_if_asked(temporal_client, run_id, "cluster_check")

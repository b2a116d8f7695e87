"""Issue 31, the high one: registering `<ok>:<evil>` as a cluster's kubeconfig, then any dry run (a
viewer's), made the worker's `kubernetes` client load the second file (it splits `config_file` on ':'
like KUBECONFIG) and run its exec plugin. Now the registration is refused, and a row that holds such
a reference anyway (stored before the rules) is refused by the worker's own loader, which builds the
client from content it read and checked: no program runs."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest_asyncio
import yaml

from api.app import create_app
from api.auth import TokenTable
from sim.kube import SimulatedClusters, default_cluster_specs
from tests.conftest import unique_queue
from tests.support import running_worker, wait_for_pollers
from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster
from wingsmith.domain.config import Settings
from worker.registry import WorkerDeps

TOKENS = {"tok-admin": {"name": "ada", "roles": ["admin"]}, "tok-view": {"name": "vic", "roles": ["viewer"]}}
ADMIN, VIEWER = {"Authorization": "Bearer tok-admin"}, {"Authorization": "Bearer tok-view"}
PLAN = {"hardware": "h200", "gpus_per_node": 8, "replicas": 1}


@pytest_asyncio.fixture(loop_scope="session")
async def plane(pg_pool, temporal_client, tmp_path):
    await pg_pool.execute("delete from clusters")
    queue = unique_queue("kubeattack")
    settings = Settings(home=tmp_path / "home", auth_tokens=json.dumps(TOKENS), log_format="json",
                        task_queue=queue, kube_task_queue=queue + "-kube")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool, temporal=temporal_client)
    with SimulatedClusters(default_cluster_specs()[:1], home=tmp_path / "sim", operator_delay=0.1) as sims:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
            yield api, settings, sims
    await pg_pool.execute("delete from clusters")


def evil_kubeconfig(tmp_path):
    mark = tmp_path / "exec-plugin-ran"
    script = tmp_path / "plugin"
    script.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    evil = tmp_path / "evil.yaml"
    evil.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "evil",
        "clusters": [{"name": "evil", "cluster": {"server": "http://127.0.0.1:1"}}],
        "contexts": [{"name": "evil", "context": {"cluster": "evil", "user": "evil"}}],
        "users": [{"name": "evil", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                     "command": str(script), "interactiveMode": "Never"}}}]}))
    return evil, mark


def path_list(tmp_path):
    """`<tmp>/x:<tmp>/evil.yaml`, whose literal path exists too and is harmless: a check that reads the
    literal file finds nothing to refuse, while a client that splits it on ':' loads `<tmp>/x` (absent,
    skipped) and evil.yaml."""
    evil, mark = evil_kubeconfig(tmp_path)
    reference = f"{tmp_path}/x:{evil}"
    literal = Path(reference)
    literal.parent.mkdir(parents=True)
    harmless = yaml.safe_load(evil.read_text())
    harmless["users"] = [{"name": "evil", "user": {"token": "harmless"}}]
    literal.write_text(yaml.safe_dump(harmless))
    return reference, mark


async def test_a_path_list_kubeconfig_runs_no_program_in_the_worker(plane, pg_pool, temporal_client, tmp_path):
    api, settings, sims = plane
    reference, mark = path_list(tmp_path)
    registered = await api.post("/v1/clusters", json={"name": "sneaky", "kubeconfig": reference,
                                                      "kube_context": "evil"}, headers=ADMIN)
    if registered.status_code != 201:
        # As a row written before these rules would hold it: the worker must refuse it by itself.
        await create_cluster(pg_pool, ClusterSpec(name="sneaky", kubeconfig=reference, kube_context="evil"))
    async with running_worker(temporal_client, WorkerDeps(settings=settings, db=pg_pool)):
        await wait_for_pollers(temporal_client, settings)
        r = await api.post("/v1/placements/dry-run", json={"plan": PLAN}, headers=VIEWER)
    assert r.status_code == 200, r.text
    assert not mark.exists(), "the evil kubeconfig's exec plugin ran in the worker"
    assert registered.status_code == 422, registered.text
    error = registered.json()["error"]
    assert error["code"] == "kubeconfig_path_list" and error["details"] == {"field": "kubeconfig"}
    inventory = {inv["cluster"]: inv for inv in r.json()["inventories"]}["sneaky"]
    assert "KubeconfigPathList" in inventory["error"] and not inventory["pools"]

"""The workload test bed: everything of the artifact journey, plus three simulated clusters
(the Kubernetes emulator with its Dynamo operator) registered in the plane."""

from __future__ import annotations

import pytest
import pytest_asyncio

from sim.kube import SimulatedClusters, default_cluster_specs
from tests.artifacts.conftest import HF_TOKEN, HF_TOKEN_ENV, KIMI, TOKENS, api, as_, deps, hub  # noqa: F401
from tests.support import running_worker, wait_until
from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    with SimulatedClusters(default_cluster_specs(), home=tmp_path_factory.mktemp("sim"), operator_delay=0.2) as s:
        yield s


@pytest.fixture
def settings(hub, sims, tmp_path, monkeypatch):  # noqa: F811 - pytest fixtures imported above
    import json

    from tests.conftest import unique_queue
    from wingsmith.domain.config import Settings
    monkeypatch.setenv(HF_TOKEN_ENV, HF_TOKEN)
    queue = unique_queue("wl")
    return Settings(home=tmp_path / "home", hf_endpoint=hub.url, hf_token_ref=HF_TOKEN_ENV, task_queue=queue,
                    kube_task_queue=queue + "-kube", auth_tokens=json.dumps(TOKENS), log_format="json",
                    rollout_poll_seconds=0.2, ready_deadline_seconds=8)


@pytest_asyncio.fixture(loop_scope="session")
async def clusters(pg_pool, sims):
    """The three simulated clusters, registered, with faults cleared before and after each test."""
    for name in sims.names:
        sims.faults(name).reset()
    for name in sims.names:
        spec = sims.cluster(name).spec
        await create_cluster(pg_pool, ClusterSpec(
            name=name, region=spec.region, kubeconfig=str(sims.kubeconfig_path), kube_context=sims.context(name),
            frontend_base_url=f"{sims.base_url}/frontends/{name}"))
    yield sims
    for name in sims.names:
        sims.faults(name).reset()


@pytest_asyncio.fixture(loop_scope="session")
async def approved_kimi(api, deps, temporal_client):  # noqa: F811 - pytest fixtures imported above
    """Kimi-K3 registered by an operator and approved by an approver, through the API (once per module)."""
    listed = (await api.get("/v1/artifacts", params={"state": "approved", "model": KIMI},
                            headers=as_("tok-vic"))).json()["artifacts"]
    if listed:
        return listed[0]["id"]
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/artifacts", json={"source": f"hf:{KIMI}"}, headers=as_("tok-olga"))
        artifact = r.json()["id"]

        async def draft():
            got = (await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()
            return got.get("state") in ("draft", "approved")
        await wait_until(draft, what="the Kimi-K3 draft")
        await api.post(f"/v1/artifacts/{artifact}/review", headers=as_("tok-ana"),
                       json={"decision": "approve", "draft_version": 1})
    return artifact


def dgds(sims, workload_id: str | None = None) -> dict[str, list[dict]]:
    out = {}
    for name in sims.names:
        found = [d for d in sims.cluster(name).dgds()
                 if workload_id is None or d["metadata"]["name"].startswith(workload_id)]
        if found:
            out[name] = found
    return out

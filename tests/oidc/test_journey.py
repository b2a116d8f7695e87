"""The whole journey signed in with OIDC tokens from the tests' own issuer, on a real Temporal server and
Postgres with the emulator's clusters: an operator of team `ml` registers Kimi-K3, a second subject with
the approver role approves it (the registrant cannot, under another role), the operator rolls out a
workload that belongs to `ml`, and another team's operator cannot see it."""

from __future__ import annotations

import json

import pytest

from tests.conftest import unique_queue
from tests.oidc.conftest import bearer
from tests.oidc.issuer import AUDIENCE, Issuer
from tests.support import running_worker, wait_until
from tests.workloads.conftest import (  # noqa: F401 - pytest fixtures
    HF_TOKEN,
    HF_TOKEN_ENV,
    KIMI,
    TOKENS,
    api,
    clusters,
    deps,
    dgds,
    hub,
    sims,
)
from wingsmith.domain.config import Settings


@pytest.fixture(scope="module")
def issuer():
    it = Issuer()
    yield it
    it.stop()


@pytest.fixture
def settings(hub, sims, issuer, tmp_path, monkeypatch):  # noqa: F811 - pytest fixtures imported above
    monkeypatch.setenv(HF_TOKEN_ENV, HF_TOKEN)
    queue = unique_queue("sso")
    return Settings(home=tmp_path / "home", hf_endpoint=hub.url, hf_token_ref=HF_TOKEN_ENV, task_queue=queue,
                    kube_task_queue=queue + "-kube", auth_tokens=json.dumps(TOKENS), log_format="json",
                    rollout_poll_seconds=0.2, ready_deadline_seconds=8, oidc_issuer=issuer.url,
                    oidc_audience=AUDIENCE, oidc_roles_claim="realm_access.roles")


def sso(issuer: Issuer, name: str, roles: list[str], team: str) -> dict[str, str]:
    return bearer(issuer.token(name, [], team, realm_access={"roles": roles}))


async def test_register_approve_and_roll_out_with_sso_tokens(api, deps, temporal_client, clusters, issuer,  # noqa: F811
                                                             pg_pool):
    olivia = sso(issuer, "olivia", ["operator", "offline_access"], "ml")
    olivia_approving = sso(issuer, "olivia", ["approver"], "ml")  # the same person, another role
    alan = sso(issuer, "alan", ["approver"], "ml")
    oscar = sso(issuer, "oscar", ["operator"], "search")  # another team
    root = sso(issuer, "root", ["admin"], "platform")
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/artifacts", json={"source": f"hf:{KIMI}"}, headers=olivia)
        assert r.status_code == 202, r.text
        artifact = r.json()["id"]

        async def draft():
            got = (await api.get(f"/v1/artifacts/{artifact}", headers=alan)).json()
            return got if got.get("state") == "draft" else None
        row = await wait_until(draft, timeout=60, what="the Kimi-K3 draft")
        assert row["live"]["requested_by"] == "olivia"

        review = {"decision": "approve", "draft_version": 1}
        self_approval = await api.post(f"/v1/artifacts/{artifact}/review", json=review, headers=olivia_approving)
        assert self_approval.status_code == 403 and self_approval.json()["error"]["code"] == "self_approval", \
            self_approval.text
        assert (await api.post(f"/v1/artifacts/{artifact}/review", json=review, headers=olivia)).status_code == 403
        approved = await api.post(f"/v1/artifacts/{artifact}/review", json=review, headers=alan)
        assert approved.status_code == 200 and approved.json()["decision"]["reviewer"] == "alan", approved.text

        body = {"artifact_id": artifact, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 1,
                "name": "kimi-sso"}
        r = await api.post("/v1/workloads", json=body, headers=olivia)
        assert r.status_code == 202, r.text

        async def serving():
            got = (await api.get("/v1/workloads/kimi-sso", headers=olivia)).json()
            return got if (got.get("live") or {}).get("stage") in ("serving", "failed") else None
        live = await wait_until(serving, timeout=90, interval=0.2, what="kimi-sso to serve")
        assert live["live"]["stage"] == "serving", live
        assert live["team"] == "ml" and live["requested_by"] == "olivia"
        assert dgds(clusters, "kimi-sso")

        # Another team's operator: as if absent. An admin of any team: visible.
        assert (await api.get("/v1/workloads/kimi-sso", headers=oscar)).status_code == 404
        assert "kimi-sso" not in {w["id"] for w in (await api.get("/v1/workloads", headers=oscar)).json()["workloads"]}
        assert (await api.get("/v1/workloads/kimi-sso", headers=root)).status_code == 200

        r = await api.delete("/v1/workloads/kimi-sso", headers=olivia)
        assert r.status_code == 202, r.text

        async def deleted():
            got = (await api.get("/v1/workloads/kimi-sso", headers=olivia)).json()
            return (got.get("live") or {}).get("stage") == "deleted"
        await wait_until(deleted, timeout=60, interval=0.2, what="kimi-sso to be deleted")
    assert dgds(clusters, "kimi-sso") == {}
    events = await pg_pool.fetch("select actor from events where subject = $1", artifact)
    assert {"olivia", "alan"} <= {e["actor"] for e in events}

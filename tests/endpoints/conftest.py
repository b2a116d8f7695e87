"""The endpoint test bed: the workload bed plus the local gateway, which the plane drives through
its authenticated admin API."""

from __future__ import annotations

import json

import pytest

from tests.gateway.conftest import RunningGateway
from tests.workloads.conftest import HF_TOKEN, HF_TOKEN_ENV, TOKENS, api, approved_kimi, clusters, deps, hub, sims  # noqa: F401


@pytest.fixture
def gateway(tmp_path):
    token = tmp_path / "gateway-token"
    token.write_text("gateway-admin-secret-for-tests\n")
    gw = RunningGateway(tmp_path / "gateway-state", token)
    yield gw
    gw.stop()


@pytest.fixture
def settings(hub, sims, gateway, tmp_path, monkeypatch):  # noqa: F811 - pytest fixtures imported above
    from tests.conftest import unique_queue
    from wingsmith.domain.config import Settings
    monkeypatch.setenv(HF_TOKEN_ENV, HF_TOKEN)
    queue = unique_queue("ep")
    return Settings(home=tmp_path / "home", hf_endpoint=hub.url, hf_token_ref=HF_TOKEN_ENV, task_queue=queue,
                    kube_task_queue=queue + "-kube", auth_tokens=json.dumps(TOKENS), log_format="json",
                    rollout_poll_seconds=0.2, ready_deadline_seconds=8, gateway_url=gateway.url,
                    gateway_admin_token_ref=gateway.token_ref, drain_grace_seconds=3)

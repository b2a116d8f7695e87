"""The teams test bed: the endpoint bed (three simulated clusters, the local gateway) with a token
table of two operator teams, a viewer of each, an approver and an admin of a third team. Tokens that
name no team (olga, ana, vic) are the default team's, as every token was before teams existed."""

from __future__ import annotations

import json

import pytest

from tests.endpoints.conftest import gateway  # noqa: F401
from tests.workloads.conftest import (  # noqa: F401
    HF_TOKEN,
    HF_TOKEN_ENV,
    api,
    approved_kimi,
    as_,
    clusters,
    deps,
    hub,
    sims,
)

TEAM_TOKENS = {
    "tok-olga": {"name": "olga", "roles": ["operator"]},
    "tok-ana": {"name": "ana", "roles": ["approver"]},
    "tok-vic": {"name": "vic", "roles": ["viewer"]},
    "tok-rita": {"name": "rita", "roles": ["operator"], "team": "red"},
    "tok-vera": {"name": "vera", "roles": ["viewer"], "team": "red"},
    "tok-rex": {"name": "rex", "roles": ["approver"], "team": "red"},  # answers red's autoscalers past the budget
    "tok-root": {"name": "root", "roles": ["admin"], "team": "ops"},
}


@pytest.fixture
def settings(hub, sims, gateway, tmp_path, monkeypatch):  # noqa: F811 - pytest fixtures imported above
    from tests.conftest import unique_queue
    from wingsmith.domain.config import Settings
    monkeypatch.setenv(HF_TOKEN_ENV, HF_TOKEN)
    queue = unique_queue("team")
    return Settings(home=tmp_path / "home", hf_endpoint=hub.url, hf_token_ref=HF_TOKEN_ENV, task_queue=queue,
                    kube_task_queue=queue + "-kube", auth_tokens=json.dumps(TEAM_TOKENS), log_format="json",
                    rollout_poll_seconds=0.2, ready_deadline_seconds=8, gateway_url=gateway.url,
                    gateway_admin_token_ref=gateway.token_ref, drain_grace_seconds=3)

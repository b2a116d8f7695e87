"""The replicated plane under SIGKILL (issue 33, section 3), small: bench/ha.py's own run, shorter.

2 APIs, 2 workers per task queue and 2 gateways against one Temporal and one Postgres, each started from
the command and environment `deploy/kustomize/overlays/production` renders, so the manifests cannot rot:
a Deployment added, renamed or given another command or variable there is what this test starts, or it
fails. One of each is SIGKILLed under chats, API calls and workflows, and started again. Asserted: no
workflow lost or stuck; no chat failed for a client that retries once on the other gateway; every API
call answered 200 or 503 with Retry-After; every killed process back and answering its rendered
readiness probe; nothing else died."""

from __future__ import annotations

import sys

import pytest

from bench import ha
from tests.deploy.render import KUSTOMIZE, processes, render

pytestmark = pytest.mark.slow

# What the bench may change in a rendered environment: where things are on this machine, never what runs.
LOCAL = {"PATH", "TEMPORAL_ADDRESS", "WINGSMITH_HOME", "WINGSMITH_API_HOST", "WINGSMITH_API_PORT",
         "WINGSMITH_WORKER_METRICS_HOST", "WINGSMITH_WORKER_METRICS_PORT", "WINGSMITH_KUBECONFIG_DIR",
         "WINGSMITH_GATEWAY_URL", "WINGSMITH_GATEWAY_ROUTES_SOURCE"}
# Dropped: the dev server speaks plain gRPC (mTLS has tests/production/test_secured_temporal.py); the
# gateway's client keys come from an optional Secret the bench does not give.
DROPPED = ("TEMPORAL_TLS_", "WINGSMITH_GATEWAY_CLIENT_KEYS_REF")
# The gateway's listening address and state directory are arguments: their values are local too.
LOCAL_ARGS = {"--host", "--port", "--state-dir"}


def _without_local_args(cmd: list[str]) -> list[str]:
    return [a for i, a in enumerate(cmd) if not (i > 0 and cmd[i - 1] in LOCAL_ARGS)]


async def test_killing_one_replica_of_each_kind_loses_no_workflow_chat_or_api_call(tmp_path, monkeypatch):
    # The bench sets the payload key in this process's environment for its client: put back afterwards.
    monkeypatch.setenv("WINGSMITH_BENCH_PAYLOAD_KEY", "")
    args = ha.parse_args(["--seconds", "16", "--kill-after", "5", "--down-for", "3", "--workflow-grace", "30"])
    seen: dict = {}
    figures = await ha.run(args, tmp_path, seen)  # stops every process it started, also when it raises
    print(figures)

    # Started from the production overlay: every Deployment it runs (perf's 0 replicas aside), 2 of each.
    rendered = processes(render(KUSTOMIZE / "overlays" / "production"), seen["secrets"])
    assert seen["rendered"] == rendered
    deployments = {name for name, p in rendered.items() if p.replicas > 0}
    replicas = seen["replicas"]
    assert {r.deployment for r in replicas} == deployments
    for name in deployments:
        assert rendered[name].replicas >= 2, f"{name}: the production overlay should replicate it"
        assert sorted(r.index for r in replicas if r.deployment == name) == [0, 1], name
    for r in replicas:
        p = rendered[r.deployment]
        assert r.cmd[0] == sys.executable and p.command[0] == "python", r.cmd
        assert _without_local_args(r.cmd[1:]) == _without_local_args(p.command[1:]), (r.name, r.cmd)
        kept = {k: v for k, v in p.env.items() if not k.startswith(DROPPED) and k not in LOCAL}
        assert {k: v for k, v in r.env.items() if k not in LOCAL} == kept, r.name

    # One of each killed and back.
    assert sorted(figures["killed"]) == sorted(f"{name}-0" for name in deployments)
    assert figures["back"] == {name: True for name in figures["killed"]}, figures["back"]
    assert figures["dead_at_the_end"] == {}, figures["dead_at_the_end"]
    # Nothing lost: workflows, chats (one retry on the other gateway), API calls (200 or 503 + Retry-After).
    assert figures["workflows_started"] > 0 and figures["workflows_lost_or_stuck"] == 0, figures
    assert figures["chats_answered"] > 0 and figures["chats_failed_after_one_retry"] == 0, figures["chat_failures"]
    assert figures["api_calls_ok"] > 0 and figures["api_calls_failed_otherwise"] == 0, figures["api_failures"]

"""Deadlines and crashes: a draft nobody reviews expires after reminders (time-skipping server), and
a worker killed with SIGKILL while the workflow waits loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

from contracts.artifact import ArtifactWorkflowInput, ReviewPolicy, start_search_attributes
from tests.artifacts.conftest import KIMI
from tests.support import running_worker, wait_until
from wingsmith.adapters.starter import artifact_handle, register_artifact
from wingsmith.domain.review import ReviewRequest
from workflows.artifact import ArtifactWorkflow

SHA = "460b4da85b29d2ff6a52eb994049a001f654f8af"  # Kimi-K3's commit in the snapshot


async def test_an_unreviewed_draft_expires_after_its_reminders(time_skipping_env, deps, pg_pool):
    client = time_skipping_env.client
    params = ArtifactWorkflowInput(repo_id=KIMI, revision="main", sha=SHA, requested_by="olga",
                                   policy=ReviewPolicy(deadline_seconds=3 * 24 * 3600,
                                                       remind_before_seconds=[24 * 3600, 3600]))
    async with running_worker(client, deps) as queue:
        wid = f"artifact/{KIMI}@{SHA}-{uuid.uuid4().hex[:6]}"
        handle = await client.start_workflow(ArtifactWorkflow.run, params, id=wid, task_queue=queue,
                                             search_attributes=start_search_attributes(params))
        outcome = await handle.result()  # time skips over three days of waiting
        assert outcome.stage == "expired" and outcome.decision.via == "timer"
        status = await handle.query(ArtifactWorkflow.status)
        assert status.reminders_sent == 2
        # Reminders fired at deadline - 24h and deadline - 1h, then the expiry at the deadline.
        history = await handle.fetch_history()
        timers = [round(e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds() / 60)
                  for e in history.events if e.HasField("timer_started_event_attributes")]
        assert timers == [2 * 24 * 60, 23 * 60, 60]  # minutes, less the few ms the reminders took
        row = await pg_pool.fetchrow("select decision, via from reviews where artifact_id = $1", f"{KIMI}@{SHA}")
        assert dict(row) == {"decision": "expire", "via": "timer"}


async def test_worker_killed_while_waiting_then_approval_completes(deps, temporal_client, pg_pool, pg_dsn, tmp_path):
    settings = deps.settings
    env = dict(os.environ, DATABASE_URL=pg_dsn, WINGSMITH_TASK_QUEUE=settings.task_queue,
               WINGSMITH_HF_ENDPOINT=settings.hf_endpoint, WINGSMITH_HF_TOKEN_REF=settings.hf_token_ref,
               WINGSMITH_HOME=str(tmp_path / "worker-home"), WINGSMITH_LOG_FORMAT="json")
    env["TEMPORAL_ADDRESS"] = temporal_client.service_client.config.target_host
    env["TEMPORAL_NAMESPACE"] = temporal_client.namespace
    log_file = (tmp_path / "worker.log").open("wb")  # noqa: ASYNC230 - opening a local file does not wait
    # Popen only starts the worker process; the test waits for it later, asynchronously.
    worker = subprocess.Popen([sys.executable, "-m", "worker"], env=env,  # noqa: ASYNC220
                              stdout=subprocess.DEVNULL, stderr=log_file)
    try:
        started = await register_artifact(temporal_client, settings, source="hf:moonshotai/Kimi-K2-Instruct",
                                          sha="15c22b7e05ab113c7831f441aee0f728ff34d1df", requested_by="olga")
        handle = artifact_handle(temporal_client, started.id)

        async def waiting():
            return (await handle.query(ArtifactWorkflow.status)).stage == "draft"
        await wait_until(waiting, timeout=60, what="the draft")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    finally:
        if worker.poll() is None:
            worker.kill()

    # A new worker picks the waiting workflow up where it was; the approval completes it.
    async with running_worker(temporal_client, deps):
        status = await handle.execute_update(ArtifactWorkflow.review, ReviewRequest(
            decision="approve", draft_version=1, reviewer="ana", comment="after the crash"))
        assert status.stage == "approved"
        outcome = await handle.result()
    assert outcome.decision.comment == "after the crash"
    assert await pg_pool.fetchval("select count(*) from drafts where artifact_id = $1", started.id) == 1
    assert await pg_pool.fetchval("select state from artifacts where id = $1", started.id) == "approved"

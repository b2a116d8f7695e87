"""The autoscaling part of the workload page (issue 53) against a real Postgres and Temporal: the policy in
words, the autoscaler's recorded scales in a table with their outcomes and drawn over the traffic charts (an
arrowhead up for a scale-out, down for a scale-in; holds neither listed nor drawn), everything escaped; a real
`AutoscalerWorkflow` (decide and scale faked, the real record) waits past the budget, the page offers an operator
(not a viewer) its Approve button, and the console's form approves it through the service, after which the scale
is recorded `scaled`. A workload without a policy says so."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from html import unescape

from temporalio import activity
from temporalio.worker import Worker

from activities.autoscaler import AutoscalerActivities
from contracts import autoscaler as contract
from contracts.autoscaler import AutoscalerInput, AutoscalerStatus, DecideInput, DecideResult, ScaleAsk, ScaleOutcome
from contracts.ids import autoscaler_workflow_id
from tests.console.conftest import browser_for, csrf_of, sign_in
from tests.support import wait_until
from wingsmith.adapters.store import autoscaling as store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.adapters.store.traffic_samples import SLOT_SECONDS, record_samples
from wingsmith.domain.autoscaling import Action, AutoscalingPolicy, Decision, Inputs
from wingsmith.domain.gateway.traffic import BackendCounters
from worker.sandbox import WORKFLOW_RUNNER
from workflows.autoscaler import AutoscalerWorkflow

HOSTILE = '<script>alert("x")</script>'
POLICY = AutoscalingPolicy(min_replicas=1, max_replicas=4, ttft_p95_ms=1000, scale_up_window_s=60,
                           scale_down_window_s=120, cooldown_s=60, approval_past_budget=True)
SPEC = {"engine": "vllm", "hardware": "h200", "layout": "single_node_tp", "replicas": 1, "variant": "default",
        "features": [], "gpus_per_replica": 8, "served_model_name": "scaled-model"}


def decision(action: Action, start: int, to: int, at: datetime, *reasons: str) -> Decision:
    return Decision(action=action, replicas_from=start, replicas_to=to, reasons=list(reasons),
                    inputs=Inputs(at=at, replicas=start, policy=POLICY, capacity_per_replica=None,
                                  capacity_from="unknown", samples=3))


async def _seed(pool, workload: str, now: datetime) -> None:
    artifact = f"org/{workload}@aaa"
    await pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                       "values ($1, $2, 'main', 'aaa', 'approved', $3, 'olga')", artifact, f"org/{workload}",
                       f"artifact/{artifact}")
    await workload_store.upsert_workload(pool, workload_id=workload, artifact_id=artifact, spec=SPEC, state="serving",
                                         workflow_id=f"workload/{workload}", requested_by="olga", step="t")
    # Traffic over the last ten minutes, so the charts the marks go over are drawn.
    gateway, backend = f"gw-{uuid.uuid4().hex[:6]}", f"sim-alpha/{workload}"
    for k in range(31):
        requests = 40 * k
        await record_samples(pool, at=now - timedelta(seconds=600 - SLOT_SECONDS * k), gateway=gateway,
                             counters={("scaled-model", backend): BackendCounters(
                                 requests=requests, duration={1.0: requests, float("inf"): requests},
                                 first_byte={0.5: requests // 2, 2.5: requests, float("inf"): requests})},
                             keep_seconds=3600)
    source = f"earlier/{workload}"  # an earlier loop's (the real one below numbers its own ticks from 1)
    recorded = [
        ("1", decision("scale_out", 1, 2, now - timedelta(seconds=500), "TTFT p95 2500 ms over 1000 ms"), "scaled",
         "asked the workload for 2 replica(s)"),
        ("2", decision("hold", 2, 2, now - timedelta(seconds=470), "cooling down"), "held", ""),
        ("3", decision("scale_out", 2, 4, now - timedelta(seconds=300), "TTFT p95 3000 ms over 1000 ms"),
         "held_quota", f"past team default's quota: h200: 16 used + 16 asked > 24 GPUs {HOSTILE}"),
        ("4", decision("scale_in", 2, 1, now - timedelta(seconds=200), f"room for one fewer {HOSTILE}"), "scaled",
         "asked the workload for 1 replica(s)"),
        ("5", decision("hold", 1, 1, now - timedelta(seconds=190), "within targets; at min_replicas 1"), "held", ""),
    ]
    for step, d, outcome, note in recorded:
        await store.record_decision(pool, workload_id=workload, source=source, step=f"an-earlier-loop:{step}",
                                    decision=d, outcome=outcome, note=note)


def marks(html: str) -> list[tuple[str, str]]:
    """Each decision drawn over a chart: (its arrowhead's direction, its title)."""
    return re.findall(r'<path class="mark-head mark-\d" data-head="(up|down)"[^>]*><title>([^<]*)</title>', html)


def table_rows(html: str) -> list[str]:
    body = html.split('id="autoscale-table"', 1)[1].split("</table>", 1)[0]
    return [unescape(re.sub(r"<[^>]+>", " ", r)) for r in re.findall(r"<tr data-autoscale=.*?</tr>", body, re.S)]


async def test_the_page_draws_the_decisions_and_approves_one_past_the_budget(plane, pg_pool, temporal_client):
    workload = f"scaler-{uuid.uuid4().hex[:6]}"
    now = await pg_pool.fetchval("select now()")
    await _seed(pg_pool, workload, now)
    async with browser_for(plane) as vic, browser_for(plane) as olga, browser_for(plane) as ana:
        await sign_in(vic, "tok-vic")
        await sign_in(olga, "tok-olga")
        await sign_in(ana, "tok-ana")

        bare = await vic.get(f"/console/workloads/{workload}")
        assert bare.status_code == 200, bare.text
        assert 'id="no-autoscaling"' in bare.text and 'id="autoscale-table"' in bare.text  # recorded, no policy

        await store.set_policy(pg_pool, workload, POLICY, "olga")
        page = await vic.get(f"/console/workloads/{workload}")
        html = page.text
        assert page.status_code == 200 and 'id="no-autoscaling"' not in html
        policy = unescape(html.split('id="autoscale-policy-words"', 1)[1].split("</ul>", 1)[0])
        assert "between 1 and 4 replicas" in policy and "time to first token p95 ≤ 1000 ms" in policy
        assert "waits for an approval" in policy
        rows = table_rows(html)
        assert len(rows) == 3, rows  # the scales, newest first; the holds are not listed
        assert "scale in 2 → 1" in rows[0] and "scaled" in rows[0] and f"room for one fewer {HOSTILE}" in rows[0]
        assert "scale out 2 → 4" in rows[1] and "held: past the team's GPU quota" in rows[1]
        assert "16 used + 16 asked > 24 GPUs" in rows[1]
        assert "scale out 1 → 2" in rows[2] and "scaled" in rows[2]
        assert HOSTILE not in html and "&lt;script&gt;" in html  # decision words are data
        assert "within targets; at min_replicas 1" in unescape(html.split('id="autoscale-latest"', 1)[1][:400])

        # Drawn over both charts of the backend (requests, latency), holds not drawn: three marks a chart, with
        # the policy's TTFT target as a level on the latency chart.
        drawn = marks(html)
        assert len(drawn) == 6 and len(set(drawn)) == 3, drawn
        titles = {unescape(t): h for h, t in drawn}
        assert {h for t, h in titles.items() if "scale out" in t} == {"up"}
        assert {h for t, h in titles.items() if "scale in" in t} == {"down"}
        assert any("scale out 2 → 4, held: past the team's GPU quota" in t for t in titles)
        assert re.search(r'<path class="mark-head mark-0" data-head="up"', html)  # not done: red
        assert "autoscaling target: time to first token p95" in html
        assert 'id="autoscale-approve-form"' not in html  # nothing waits

        # A real loop whose scale-out waits past the budget: an approver sees Approve; the viewer and the operator
        # (whose workload it is: the budget is not theirs to lift) do not.
        decided: list[datetime] = []

        @activity.defn(name=contract.ACTIVITY_DECIDE)
        async def fake_decide(params: DecideInput) -> DecideResult:
            if decided:
                return DecideResult(stop="the test is over")
            decided.append(params.now)
            return DecideResult(decision=decision("scale_out", 1, 3, params.now, "TTFT p95 2800 ms over 1000 ms"),
                                approval_past_budget=True)

        scales: list[ScaleAsk] = []

        @activity.defn(name=contract.ACTIVITY_SCALE)
        async def fake_scale(ask: ScaleAsk) -> ScaleOutcome:
            if not ask.past_budget:
                return ScaleOutcome(outcome="held_budget", words="past team default's quota: budget: 30 used + 20 "
                                    "asked > 40 per hour")
            scales.append(ask)
            return ScaleOutcome(outcome="scaled", words=f"asked the workload for {ask.replicas} replica(s)")

        queue = f"as-page-{uuid.uuid4().hex[:8]}"
        async with Worker(temporal_client, task_queue=queue, workflows=[AutoscalerWorkflow],
                          activities=[fake_decide, fake_scale, AutoscalerActivities(pg_pool).record],
                          workflow_runner=WORKFLOW_RUNNER):
            handle = await temporal_client.start_workflow(
                contract.WORKFLOW, AutoscalerInput(workload_id=workload, period_seconds=1),
                id=autoscaler_workflow_id(workload), task_queue=queue, result_type=AutoscalerStatus)

            async def waiting():
                return (await handle.query(contract.QUERY_STATUS, result_type=AutoscalerStatus)).waiting
            waits = await wait_until(waiting, timeout=30, what="the scale-out to wait for an approval")

            seen = await vic.get(f"/console/workloads/{workload}")
            assert 'id="autoscale-waiting"' in seen.text and 'id="autoscale-approve-form"' not in seen.text
            assert "40 per hour" in unescape(seen.text.split('id="autoscale-waiting"', 1)[1][:600])
            assert re.search(r'<path class="mark-head mark-2" data-head="up"', seen.text)  # waiting: amber
            assert "waiting for an approval" in table_rows(seen.text)[0]

            theirs = await olga.get(f"/console/workloads/{workload}")
            assert 'id="autoscale-waiting"' in theirs.text and 'id="autoscale-approve-form"' not in theirs.text
            operator_refused = await olga.post(f"/console/workloads/{workload}/autoscaling/approve",
                                               data={"csrf": csrf_of(theirs.text), "tick": str(waits.tick),
                                                     "decision": "approve"})
            assert operator_refused.status_code == 403
            mine = await ana.get(f"/console/workloads/{workload}")
            assert 'id="autoscale-approve-form"' in mine.text
            assert f'name="tick" value="{waits.tick}"' in mine.text
            token = csrf_of(mine.text)
            refused = await vic.post(f"/console/workloads/{workload}/autoscaling/approve",
                                     data={"csrf": csrf_of(seen.text), "tick": str(waits.tick), "decision": "approve"})
            assert refused.status_code == 403
            no_csrf = await ana.post(f"/console/workloads/{workload}/autoscaling/approve",
                                      data={"tick": str(waits.tick), "decision": "approve"})
            assert no_csrf.status_code == 403
            bad = await ana.post(f"/console/workloads/{workload}/autoscaling/approve",
                                  data={"csrf": token, "tick": "zero", "decision": "approve"})
            assert bad.status_code == 422 and "body.tick" in unescape(bad.text)
            wrong = await ana.post(f"/console/workloads/{workload}/autoscaling/approve",
                                    data={"csrf": token, "tick": str(waits.tick + 7), "decision": "approve"})
            assert wrong.status_code == 409 and f"decision {waits.tick} does" in unescape(wrong.text)
            assert scales == []

            done = await ana.post(f"/console/workloads/{workload}/autoscaling/approve",
                                   data={"csrf": token, "tick": str(waits.tick), "decision": "approve",
                                         "comment": "launch day"})
            assert done.status_code == 303, done.text
            assert done.headers["location"] == f"/console/workloads/{workload}?autoscale=approve"
            await handle.result()  # the scale, then the next tick ends the loop
            assert [(s.replicas, s.past_budget) for s in scales] == [(3, True)]

            landed = await ana.get(done.headers["location"])
            assert 'id="autoscale-answered"' in landed.text and 'id="autoscale-approve-form"' not in landed.text
            newest = table_rows(landed.text)[0]
            # The tick waited, then scaled: one row, in its final words, drawn dark.
            assert "scale out 1 → 3" in newest and "scaled" in newest and "approved by ana: launch day" in newest
            assert sum("scale out 1 → 3" in r for r in table_rows(landed.text)) == 1
            assert re.search(r'<path class="mark-head mark-1" data-head="up" [^>]*><title>[^<]*scale out 1 → 3',
                             landed.text)

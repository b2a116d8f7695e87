"""The workload pages against a real Temporal, Postgres and the simulated clusters: the list and one
workload's clusters and events as the API reports them; viewers see no forms and are refused; the
console's scale form changes replicas as the API sees them; delete from the console tears down."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import unescape

from console.workloads import cluster_rows, event_rows
from tests.console.conftest import browser_for, csrf_of, sign_in
from tests.console.test_public_pages import rows
from tests.support import running_worker
from tests.workloads.conftest import api, approved_kimi, as_, clusters, deps, dgds, hub, settings, sims  # noqa: F401
from tests.workloads.test_workload_journey import _status, _until_stage

WL = "kimi-console"


def _serving_replicas(live: dict) -> int:
    return sum(c["replicas"] for c in live["clusters"] if c["state"] == "serving")


async def test_workload_pages_scale_and_delete(plane, api, deps, temporal_client, clusters,  # noqa: F811
                                               approved_kimi):  # noqa: F811
    async with browser_for(plane) as vic, browser_for(plane) as olga:
        await sign_in(vic, "tok-vic")
        await sign_in(olga, "tok-olga")

        empty = await vic.get("/console/workloads")
        assert empty.status_code == 200 and 'id="no-workloads"' in empty.text
        assert "wingsmith workloads create &lt;org&gt;/&lt;name&gt;@&lt;sha&gt; --hardware" in empty.text
        assert 'href="/console/workloads"' in empty.text and 'href="/console/endpoints"' in empty.text  # nav

        missing = await vic.get("/console/workloads/no-such-workload")
        assert missing.status_code == 404 and "workload no-such-workload not found" in missing.text

        async with running_worker(temporal_client, deps):
            r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
                "artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 2,
                "name": WL})
            assert r.status_code == 202, r.text
            live = await _until_stage(api, WL, {"serving", "failed"})
            assert live["stage"] == "serving", live
            seen = await _status(api, WL)

            listing = await vic.get("/console/workloads")
            row = rows(listing.text, "workload")[WL]
            assert "serving" in row and "h200" in row and "multi_node_tp_dp" in row
            for d in seen["deployments"]:
                assert f"{d['cluster']}: {d['replicas']} · {d['state']}" in row
            assert f'href="/console/artifacts/{approved_kimi}"' in listing.text

            page = await vic.get(f"/console/workloads/{WL}")
            assert page.status_code == 200, page.text
            html = unescape(page.text)
            shown = rows(page.text, "cluster")
            assert set(shown) == {c["cluster"] for c in live["clusters"]} and len(shown) == 2
            for c in live["clusters"]:
                text = shown[c["cluster"]]
                assert c["dgd_name"] in text and c["frontend_url"] in text
                assert "serving" in text and "ready" in text and "not ready" not in text
                assert f" {c['replicas']} " in f" {text} "
            assert f'href="/console/artifacts/{approved_kimi}"' in page.text
            assert "/workflows/workload%2Fkimi-console" in html
            groups = re.findall(r'<details class="events" data-operation="([^"]+)"[^>]*>(.*?)</details>',
                                page.text, re.S)
            assert groups and groups[0][1] and 'open>' in page.text.split(f'data-operation="{groups[0][0]}"')[1][:10]
            events = [e for _, body in groups for e in rows(body, "event").values()]
            assert any(e.startswith(tuple("0123456789")) and "placement" in e for e in events)
            for c in live["clusters"]:  # each cluster's serving step once, in the workflow's words
                serving = [e for e in events if f"{c['cluster']} serving" in e and "workflow" in e]
                assert len(serving) == 1, events
                assert not any(f"deployment serving: on {c['cluster']}" in e for e in events), events
            for _, body in groups:
                stamps = [e[:23] for e in rows(body, "event").values()]
                assert stamps == sorted(stamps, reverse=True), "each operation's steps are newest first"

            # A viewer sees no forms, and a viewer's POST is refused even with this session's CSRF token.
            assert 'id="scale-form"' not in page.text and 'id="delete-form"' not in page.text
            refused = await vic.post(f"/console/workloads/{WL}/scale", data={"csrf": csrf_of(page.text),
                                                                            "replicas": "3"})
            assert refused.status_code == 403 and "needs the operator role" in refused.text
            refused = await vic.post(f"/console/workloads/{WL}/delete", data={"csrf": csrf_of(page.text)})
            assert refused.status_code == 403
            assert _serving_replicas((await _status(api, WL))["live"]) == 2

            mine = await olga.get(f"/console/workloads/{WL}")
            assert 'id="scale-form"' in mine.text and 'id="delete-form"' in mine.text
            token = csrf_of(mine.text)
            no_csrf = await olga.post(f"/console/workloads/{WL}/scale", data={"replicas": "3"})
            assert no_csrf.status_code == 403 and "did not come from this console" in no_csrf.text
            bad = await olga.post(f"/console/workloads/{WL}/scale", data={"csrf": token, "replicas": "zero"})
            assert bad.status_code == 422 and 'id="workload-error"' in bad.text
            assert "Replicas must be a whole number from 1 to 256" in unescape(bad.text)

            scaled = await olga.post(f"/console/workloads/{WL}/scale", data={"csrf": token, "replicas": "3"})
            assert scaled.status_code == 303 and scaled.headers["location"] == f"/console/workloads/{WL}?scaled=3"
            after = (await _status(api, WL))["live"]
            assert after["replicas"] == 3 and _serving_replicas(after) == 3
            assert sum(sum(d["spec"]["components"][1].get("replicas", 1) for d in v)
                       for v in dgds(clusters, WL).values()) == 3
            landed = await olga.get(scaled.headers["location"])
            assert 'id="scaled"' in landed.text and '<strong id="replicas">3</strong>' in landed.text

            gone = await olga.post(f"/console/workloads/{WL}/delete", data={"csrf": token})
            assert gone.status_code == 303 and gone.headers["location"] == f"/console/workloads/{WL}?deleting=1"
            await _until_stage(api, WL, {"deleted"})
            assert dgds(clusters, WL) == {}

            final = await olga.get(f"/console/workloads/{WL}")
            assert 'id="workload-stage">deleted' in final.text and 'id="scale-form"' not in final.text
            assert "every cluster's graph has been removed" in unescape(final.text)
            # A form posted from a page opened before the delete gets the API's refusal, in words.
            late = await olga.post(f"/console/workloads/{WL}/scale", data={"csrf": token, "replicas": "2"})
            assert late.status_code in (404, 409) and 'id="workload-error"' in late.text, late.text


# Shapes as the registry and the workload workflow report them (from a run of the journey above).
_AT = datetime(2025, 1, 1, 12, 0, 5, tzinfo=UTC)
_DEPLOYED = {"cluster": "sim-east", "dgd_name": "kimi-console-sim-east", "namespace": "wingsmith", "replicas": 1,
             "state": "applied", "frontend_url": None, "detail": {"generation": 1}}


def test_cluster_rows_prefer_the_workflows_view_and_keep_the_registrys():
    cases = [
        # (registry rows, live clusters, expected (cluster, phase, ready, replicas, url, problem))
        ([_DEPLOYED], None, [("sim-east", "applied", False, 1, None, None)]),
        ([_DEPLOYED], [{"cluster": "sim-east", "replicas": 1, "state": "serving", "dgd_name": "kimi-console-sim-east",
                        "frontend_url": "http://127.0.0.1:9/f", "error": None}],
         [("sim-east", "serving", True, 1, "http://127.0.0.1:9/f", None)]),
        ([{**_DEPLOYED, "state": "failed", "detail": {"cause": "CrashLoop: worker restarts"}}],
         [{"cluster": "sim-east", "replicas": 0, "state": "failed", "error": None},
          {"cluster": "sim-west", "replicas": 0, "state": "pending"}],
         [("sim-east", "failed", False, 0, None, "CrashLoop: worker restarts"),
          ("sim-west", "pending", False, 0, None, None)]),
        # What the watch saw: not serving, and why; an edit left in place under `drift: report`.
        ([{**_DEPLOYED, "state": "degraded", "detail": {"cause": "deployment missing"}}],
         [{"cluster": "sim-east", "replicas": 1, "state": "degraded", "error": "deployment missing"},
          {"cluster": "sim-west", "replicas": 1, "state": "serving", "drift": "spec edited outside the plane"}],
         [("sim-east", "degraded", False, 1, None, "deployment missing"),
          ("sim-west", "serving", True, 1, None, "spec edited outside the plane")]),
    ]
    for recorded, live, expected in cases:
        got = cluster_rows(recorded, {"clusters": live} if live is not None else None)
        assert [(r.cluster, r.phase, r.ready, r.replicas, r.frontend_url, r.problem) for r in got] == expected


def test_event_rows_merge_registry_and_workflow_notes_in_time_order():
    registry = [{"kind": "workload_planning", "actor": "olga", "detail": {}, "at": _AT},
                {"kind": "deployment_serving", "actor": "system", "detail": {"cluster": "sim-east", "replicas": 1},
                 "at": _AT.replace(second=9, microsecond=400_000)}]
    notes = ["2025-01-01T12:00:09+00:00 sim-east serving 1 replica(s) at http://127.0.0.1:9/f",
             "2025-01-01T12:00:07+00:00 placement 1: sim-east=1", "not a stamped note"]
    got = event_rows(registry, notes)
    assert [(r.what, r.source) for r in got] == [
        ("not a stamped note", "workflow"), ("workload planning", "registry"),
        ("placement 1: sim-east=1", "workflow"), ("deployment serving: on sim-east, 1 replica(s)", "registry"),
        ("sim-east serving 1 replica(s) at http://127.0.0.1:9/f", "workflow")]
    assert got[1].when == "2025-01-01 12:00:05 UTC"


def test_a_step_both_the_registry_and_the_workflow_recorded_is_shown_once_in_the_workflows_words():
    registry = [{"kind": "workload_planning", "actor": "olga", "detail": {}, "at": _AT},
                {"kind": "deployment_serving", "actor": "system", "detail": {"cluster": "sim-east", "replicas": 1},
                 "at": _AT.replace(second=9, microsecond=400_000)},
                {"kind": "deployment_serving", "actor": "system", "detail": {"cluster": "sim-west", "replicas": 1},
                 "at": _AT.replace(second=10)}]
    timeline = [{"reason": "ClusterServing", "message": "sim-east serving 1 replica(s) at http://127.0.0.1:9/f",
                 "time": "2025-01-01T12:00:08+00:00", "detail": {"cluster": "sim-east"}},
                {"reason": "Placed", "message": "placement 1: sim-east=1", "time": "2025-01-01T12:00:07+00:00",
                 "detail": {}}]
    got = event_rows(registry, [], timeline)
    assert [(r.what, r.source) for r in got] == [
        ("workload planning", "registry"), ("placement 1: sim-east=1", "workflow"),
        ("sim-east serving 1 replica(s) at http://127.0.0.1:9/f", "workflow"),
        # another cluster's step has no twin in the timeline: the registry's row stays
        ("deployment serving: on sim-west, 1 replica(s)", "registry")]

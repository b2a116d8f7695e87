"""The console's create pages against the real plane (Temporal, Postgres, worker, simulated clusters,
local gateway): each shows what the API would do before it does it, refuses what the API refuses in
the same words, and lands on the page of what it made. Also: the model page's facts point by point for
Kimi-K3, a failed workload's one-sentence cause, and the check fragment's no-script fallback."""

from __future__ import annotations

import json
import re
import shlex
from html import unescape
from urllib.parse import urlencode

from console.workloads import failure_sentence
from tests.console.conftest import browser_for, csrf_of, sign_in
from tests.console.test_public_pages import commands, rows
from tests.endpoints.conftest import gateway, settings  # noqa: F401 - fixtures
from tests.support import running_worker, wait_for_pollers, wait_until
from tests.workloads.conftest import (  # noqa: F401
    KIMI,
    api,
    approved_kimi,
    as_,
    clusters,
    deps,
    hub,
    sims,
)
from tests.workloads.test_workload_journey import _until_stage
from wingsmith.adapters.recipes.files import load_catalog

GPT_OSS = "openai/gpt-oss-120b"


def text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


async def _api_refusal(api, body: dict) -> str:  # noqa: F811
    r = await api.post("/v1/workloads", json=body, headers=as_("tok-olga"))
    assert r.status_code == 422, r.text
    return r.json()["error"]["message"]


async def test_register_form_shows_the_proposal_then_registers(plane, api, deps, temporal_client):  # noqa: F811
    """(Not Kimi-K3: this module's other tests approve Kimi on their own task queue.)"""
    async with browser_for(plane) as olga, browser_for(plane) as vic:
        await sign_in(olga, "tok-olga")
        await sign_in(vic, "tok-vic")
        refused = await vic.get("/console/artifacts/new")
        assert refused.status_code == 403 and "needs the operator role" in refused.text

        empty = await olga.get("/console/artifacts/new")
        assert empty.status_code == 200 and 'name="source"' in empty.text and 'id="proposal"' not in empty.text

        bad = await olga.get("/console/artifacts/new", params={"source": "not a model"})
        api_says = (await api.get("/v1/artifacts/resolve", params={"source": "not a model"},
                                  headers=as_("tok-vic"))).json()["error"]["message"]
        assert api_says in unescape(bad.text)
        missing = await olga.get("/console/artifacts/new", params={"source": "hf:nobody/NoSuchModel"})
        assert "nobody/NoSuchModel" in unescape(missing.text) and 'id="register-error"' in missing.text

        resolved = (await api.get("/v1/artifacts/resolve", params={"source": f"hf:{GPT_OSS}"},
                                  headers=as_("tok-vic"))).json()
        page = await olga.get("/console/artifacts/new", params={"source": f"hf:{GPT_OSS}"})
        assert page.status_code == 200
        facts = rows(page.text, "variant")
        assert "96 GB" in facts["default"] and "80 GB" in facts["amd_fp8"]
        shown = text(page.text)
        assert resolved["sha"] in shown and "apache-2.0" in shown
        assert f"{round(resolved['weight_bytes'] / 1e9, 1)} GB" in shown
        assert "openai/gpt-oss-120b" in shown and "Tensor Parallel" in shown
        assert 'action="/console/artifacts/new"' in page.text  # nothing is registered by looking
        assert (await api.get("/v1/artifacts", params={"model": GPT_OSS}, headers=as_("tok-vic"))).json()[
            "artifacts"] == []

        async with running_worker(temporal_client, deps):
            done = await olga.post("/console/artifacts/new", data={"source": f"hf:{GPT_OSS}@main",
                                                                   "csrf": csrf_of(page.text)})
            assert done.status_code == 303, done.text
            artifact = f"{GPT_OSS}@{resolved['sha']}"
            assert done.headers["location"] == f"/console/artifacts/{artifact}?registered=1"
            landed = await olga.get(done.headers["location"])
            assert 'id="registered"' in landed.text and "review workflow started" in landed.text

            async def drafted():
                got = (await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()
                return got.get("draft")
            await wait_until(drafted, what="the draft")
            again = await olga.post("/console/artifacts/new", data={"source": f"hf:{GPT_OSS}",
                                                                    "csrf": csrf_of(page.text)})
            assert again.headers["location"].endswith("?registered=0")  # a repeat starts nothing
        forged = await olga.post("/console/artifacts/new", data={"source": f"hf:{GPT_OSS}"})
        assert forged.status_code == 403


def _form(**fields) -> str:
    return urlencode([(k, v) for k, vs in fields.items() for v in (vs if isinstance(vs, list) else [vs])])


async def test_workload_and_endpoint_forms_say_what_the_api_says(plane, api, deps, temporal_client, clusters,  # noqa: F811
                                                                 approved_kimi, gateway, pg_pool):  # noqa: F811
    # Live inventories are read by the worker, so every dry run below needs one polling.
    async with running_worker(temporal_client, deps), browser_for(plane) as olga, browser_for(plane) as vic:
        await wait_for_pollers(temporal_client, deps.settings)
        await sign_in(olga, "tok-olga")
        await sign_in(vic, "tok-vic")
        assert (await vic.get("/console/workloads/new")).status_code == 403

        # The page preselects the artifact and starts on a shape the clusters can place.
        page = await olga.get("/console/workloads/new", params={"artifact": approved_kimi})
        assert page.status_code == 200, page.text
        assert re.search(rf'<option value="{re.escape(approved_kimi)}" selected>', page.text)
        hardware = re.search(r'<select name="hardware".*?<option value="([^"]+)" selected>', page.text, re.S)[1]
        layout = re.search(r'<select name="layout".*?<option value="([^"]+)" selected>', page.text, re.S)[1]
        dry = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
            "artifact_id": approved_kimi, "hardware": hardware, "layout": layout, "dry_run": True})
        assert dry.status_code == 202 and dry.json()["placement"]["unplaced"] == 0, dry.text
        assert dry.json()["placement"]["summary"] in unescape(page.text)
        for name in ("artifact_id", "name", "hardware", "layout", "variant", "replicas", "served_model_name",
                     "features"):
            assert f'name="{name}"' in page.text

        # The fragment answers what the API's dry run answers, cluster by cluster.
        body = {"artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": "2"}
        fragment = await olga.get("/console/workloads/new/check", params=body)
        assert fragment.status_code == 200 and "<html" not in fragment.text
        dry = (await api.post("/v1/workloads", headers=as_("tok-olga"), json={**body, "dry_run": True})).json()
        assert dry["placement"]["summary"] in unescape(fragment.text)
        verdicts = rows(fragment.text, "cluster")
        assert set(verdicts) == {"sim-east", "sim-west", "sim-nvl"}
        assert "not eligible" in verdicts["sim-nvl"] and "no h200 nodes" in verdicts["sim-nvl"]
        assert "1 replica(s)" in verdicts["sim-east"] and "1 replica(s)" in verdicts["sim-west"]
        assert "fits" in text(fragment.text)

        # Every refusal reads as the API's, in the check and on a create.
        bad_bodies = [
            {**body, "replicas": "300"},
            {**body, "name": "Not_A_DNS_Label"},
            {**body, "hardware": "mi355x"},
            {**body, "layout": "multi_node_dep"},
            {**body, "features": ["no_such_feature"]},
            {**body, "replicas": "40"},  # more than the clusters hold: placement, not validation
            {**body, "artifact_id": "nobody/none@" + "0" * 40},
        ]
        for bad in bad_bodies[:5] + bad_bodies[6:]:
            said = await _api_refusal(api, {**bad, "replicas": int(bad["replicas"])})
            checked = await olga.get("/console/workloads/new/check", params=bad)
            assert said in unescape(checked.text), (bad, said)
            made = await olga.post("/console/workloads/new", content=_form(**bad, csrf=csrf_of(page.text)),
                                   headers={"content-type": "application/x-www-form-urlencoded"})
            assert made.status_code == 422 and said in unescape(made.text), (bad, said)
        crowded = await olga.get("/console/workloads/new/check", params=bad_bodies[5])
        assert "unplaced" in text(crowded.text) or "could not" in text(crowded.text) or 'class="alert warn"' in \
            crowded.text

        # Without scripts, "Check again" sends the form by GET: its token is dropped from the URL.
        stripped = await olga.get("/console/workloads/new", params={**body, "csrf": "x"})
        assert stripped.status_code == 303 and "csrf" not in stripped.headers["location"]
        rechecked = await olga.get(stripped.headers["location"])
        assert dry["placement"]["summary"] in unescape(rechecked.text)

        made = await olga.post("/console/workloads/new", content=_form(
            **body, name="kimi-form", served_model_name="kimi-k3-form", csrf=csrf_of(page.text)),
            headers={"content-type": "application/x-www-form-urlencoded"})
        assert made.status_code == 303 and made.headers["location"] == "/console/workloads/kimi-form?created=1"
        live = await _until_stage(api, "kimi-form", {"serving", "failed"})
        assert live["stage"] == "serving", live
        shown = await olga.get("/console/workloads/kimi-form")
        assert 'href="/console/endpoints/new?workload=kimi-form"' in shown.text

        # The endpoint form: the serving workload preselected, the API's refusals, then the page.
        form = await olga.get("/console/endpoints/new", params={"workload": "kimi-form"})
        assert '<option value="kimi-form" selected>' in form.text and 'value="kimi-k3-form"' in form.text
        for data, status in [({"name": "kimi-k3-form"}, 422), ({"name": "kimi-k3-form", "workloads": "nope"}, 422),
                             ({"name": "bad name!", "workloads": "kimi-form"}, 422)]:
            payload = {"name": data["name"], "workloads": [data["workloads"]] if "workloads" in data else []}
            said = (await api.post("/v1/endpoints", json=payload, headers=as_("tok-olga"))).json()["error"]
            answer = await olga.post("/console/endpoints/new", data={**data, "csrf": csrf_of(form.text)})
            assert answer.status_code == status and said["message"] in unescape(answer.text), (data, said)
        made = await olga.post("/console/endpoints/new", data={"name": "kimi-k3-form", "workloads": "kimi-form",
                                                               "csrf": csrf_of(form.text)})
        assert made.status_code == 303 and made.headers["location"] == "/console/endpoints/kimi-k3-form?created=1"
        landed = await olga.get(made.headers["location"])
        assert landed.status_code == 200 and 'id="change-workloads"' in landed.text

        # A workload that cannot be placed fails, and its list row says why in one sentence.
        r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={**body, "replicas": 40,
                                                                           "name": "kimi-too-big"})
        assert r.status_code == 202, r.text
        await _until_stage(api, "kimi-too-big", {"failed"})

        async def listed():
            got = rows((await vic.get("/console/workloads")).text, "workload").get("kimi-too-big", "")
            return got if "Failed:" in got else None
        row = await wait_until(listed, what="the failed row")
        assert "failed failed" not in row
        cause = await pg_pool.fetchval("select detail->>'cause' from events where subject = 'kimi-too-big' "
                                       "and kind = 'workload_failed' order by id desc limit 1")
        assert cause and failure_sentence(cause) in row
        failed_page = await vic.get("/console/workloads/kimi-too-big")
        assert cause in unescape(failed_page.text) and 'id="failure"' in failed_page.text
        await api.delete("/v1/endpoints/kimi-k3-form", headers=as_("tok-olga"))
        await api.delete("/v1/workloads/kimi-form", headers=as_("tok-olga"))
        await _until_stage(api, "kimi-form", {"deleted"}, timeout=60)


def test_failure_sentence_is_one_sentence():
    assert failure_sentence("no cluster could place 40 replica(s)\ndetails...") == \
        "Failed: no cluster could place 40 replica(s)."
    assert failure_sentence(None).startswith("Failed without a recorded cause")


async def test_kimi_model_page_point_by_point(plane, api, deps, temporal_client, clusters,  # noqa: F811
                                             approved_kimi):  # noqa: F811
    """Everything of issue #24's point 4 that the bundled recipe data holds, on a plane with clusters."""
    async with running_worker(temporal_client, deps), browser_for(plane) as anon:
        await wait_for_pollers(temporal_client, deps.settings)
        page = await anon.get("/console/models/moonshotai/Kimi-K3")
        sha = (await api.get("/v1/artifacts/resolve", params={"source": f"hf:{KIMI}"},
                             headers=as_("tok-vic"))).json()["sha"]
    assert page.status_code == 200, page.text
    html, shown = page.text, text(page.text)
    catalog = load_catalog()

    layouts = rows(html, "layout")
    assert "Multi-Node TP + Data Parallel multi_node_tp_dp" in layouts["multi_node_tp_dp"]
    assert "Prefill/Decode Disaggregation pd_cluster" in layouts["pd_cluster"]
    assert "spans nodes" in layouts["multi_node_tp"] and "spans nodes" not in layouts["single_node_tp"]
    features = rows(html, "feature")
    assert "Mutually exclusive with encoder_parallel" in features["text_only"]
    assert "Decode context parallelism (DCP)" in features["decode_context_parallelism"]
    for name in catalog.recipes["moonshotai/Kimi-K3"].features:
        assert len(features[name].split()) > 12, name  # a description, not just the id and flags
    assert 'id="dcp"' in html and "DCP (decode context parallelism)" in shown
    assert "Floors are for the whole replica, not per GPU" in shown
    assert "modified-mit" in shown  # the licence, as the Hub's model card states it
    for commit in (sha, catalog.vllm_source.commit, catalog.dynamo_source.commit):
        assert commit in html, commit
    assert 'data-entry="recipes/kimi-k3/vllm/agg-gb200-agentic/deploy.yaml"' in html and "GB200 NVL4" in shown
    calls = commands(html)
    assert any(c.startswith("export WINGSMITH_TOKEN=") for c in calls)
    assert all('Authorization: Bearer $WINGSMITH_TOKEN' in c for c in calls if "/v1/artifacts" in c
               or "/v1/workloads" in c or "/v1/endpoints" in c)

    # The suggested workload is one the registered clusters place whole (the recipe's default, b300, they lack).
    create = next(c for c in calls if '"/v1/workloads"' in c or c.rstrip().endswith('/v1/workloads"'))
    words = shlex.split(create.replace("\\\n", " ").replace('"$SHA"', "0" * 40).replace("$SHA", "0" * 40))
    suggested = json.loads(words[words.index("-d") + 1])
    assert suggested["hardware"] != "b300"
    async with running_worker(temporal_client, deps):
        await wait_for_pollers(temporal_client, deps.settings)
        dry = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
            **suggested, "artifact_id": approved_kimi, "dry_run": True})
    assert dry.status_code == 202, dry.text
    assert dry.json()["placement"]["unplaced"] == 0
    assert "The registered clusters can place this now" in shown

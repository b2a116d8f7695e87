"""The new-workload form sized by traffic: the target's fields beside replicas, usable without scripts; the
check refreshed while typing validates the target without starting a search; the whole page (the no-script
"Check again") plans it and shows every candidate card; refusals (no perf worker, a target nobody meets)
are shown in words with everything typed still in the form. Planning against AIConfigurator itself is
tested in tests/perf; here the plane runs without a perf worker, as most planes without the extra do."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlencode

from api.errors import ApiError
from api.responses import Planning
from console.new_workload import Check, WorkloadForm, unreachable
from console.rendering import templates
from tests.console.conftest import browser_for, csrf_of, sign_in
from tests.perf.test_planning import _config
from tests.support import running_worker
from tests.workloads.conftest import (  # noqa: F401 - fixtures
    api,
    approved_kimi,
    as_,
    deps,
    hub,
    settings,
    sims,
)
from wingsmith.adapters.traffic_plans import PlanProgress
from wingsmith.domain.draft_performance import NOT_INSTALLED
from wingsmith.domain.perf.traffic import TrafficTarget, plan_card
from wingsmith.domain.target_plan import choose_card

TARGET = {"requests_per_second": "7.5", "isl": "4000", "osl": "1000", "ttft_ms": "1000", "tpot_ms": "40"}


def _target_fields(target: dict[str, str]) -> dict[str, str]:
    return {f"target.{k}": v for k, v in target.items()}


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _rows(html: str) -> dict[str, str]:
    return {m[1]: _text(m[2]) for m in re.finditer(r'<tr data-card="([^"]+)"[^>]*>(.*?)</tr>', html, re.S)}


def _choice(target: TrafficTarget, prices: dict[str, float] | None = None):
    return choose_card([plan_card("h200", target, [_config("agg", 2, 2.0, 500, 30)]),
                        plan_card("b200", target, [_config("agg", 4, 8.0, 400, 20)])], prices)


def test_the_candidates_table_shows_each_card_s_plan_and_why_it_lost() -> None:
    target = TrafficTarget(**TARGET)
    choice = _choice(target, {"h200": 1.0, "b200": 5.0})
    rows = _rows(templates.env.get_template("_target_candidates.html").render(choice=choice))
    assert set(rows) == {"h200", "b200"}
    for candidate in choice.candidates:
        plan, conf = candidate.plan, candidate.plan.configuration
        assert conf is not None
        row = rows[plan.card]
        for figure in (conf.parallelism, f"{plan.replicas}", f"{plan.gpus}", f"{conf.ttft_ms:.0f} ms",
                       f"{conf.tpot_ms:.1f} ms", f"{conf.tokens_per_second_per_gpu:.0f}",
                       f"{candidate.cost_per_hour:.2f}"):
            assert figure in row, (figure, row)
        assert row.endswith(candidate.why_not or "chosen"), row
    assert sum("chosen" in row for row in rows.values()) == 1 and any("dearer" in row for row in rows.values())


def test_a_target_nobody_meets_shows_what_each_card_reaches() -> None:
    hard = TrafficTarget(**{**TARGET, "ttft_ms": "100"})
    choice = _choice(hard)
    assert choice.refusal
    err = ApiError(422, choice.refusal, code="target_unreachable",
                   details={"candidates": [c.model_dump(mode="json") for c in choice.candidates]})
    html = templates.env.get_template("_workload_check.html").render(
        check=Check(refusal=err.message, target_plan=unreachable(err)))
    assert choice.refusal in unescape(html)
    rows = _rows(html)
    assert set(rows) == {"h200", "b200"}
    assert all("TTFT" in row and "ms > 100 ms" in row for row in rows.values()), rows


def test_the_form_reads_the_target_fields_as_the_api_s_target() -> None:
    values = {"artifact_id": ["o/m@" + "a" * 40], "hardware": ["h200"], "sizing": ["target"], "replicas": ["3"],
              **{k: [v] for k, v in _target_fields(TARGET).items()}}
    body = WorkloadForm.read(values).request()
    assert body.target == TrafficTarget(**TARGET) and "replicas" not in body.model_fields_set
    by_replicas = WorkloadForm.read({**values, "sizing": ["replicas"]}).request()
    assert by_replicas.target is None and by_replicas.replicas == 3
    assert WorkloadForm.read({**values, "sizing": ["elsewise"]}).sizing == "replicas"


async def test_sized_by_traffic_without_a_perf_worker_the_form_says_why_and_keeps_what_was_typed(
        plane, api, deps, temporal_client, approved_kimi):  # noqa: F811
    form = {"artifact_id": approved_kimi, "hardware": "h200", "layout": "single_node_tp", "name": "kimi-traffic",
            "sizing": "target", "replicas": "1", **_target_fields(TARGET)}
    async with running_worker(temporal_client, deps), browser_for(plane) as olga:
        await sign_in(olga, "tok-olga")
        page = await olga.get("/console/workloads/new", params={"artifact": approved_kimi})
        assert page.status_code == 200, page.text
        for name in ("sizing", *_target_fields(TARGET)):
            assert f'name="{name}"' in page.text, name
        assert re.search(r'id="sizing-replicas" checked', page.text)

        # While typing: a well-formed target waits for "Check again"; a malformed one reads as the API's refusal.
        fragment = await olga.get("/console/workloads/new/check", params=form)
        assert 'id="check-target-unplanned"' in fragment.text, fragment.text
        half = {**form, "target.isl": ""}
        said = (await api.post("/v1/workloads", headers=as_("tok-olga"), json={
            "artifact_id": approved_kimi, "hardware": "h200", "dry_run": True,
            "target": {k: v for k, v in TARGET.items() if k != "isl"}})).json()["error"]["message"]
        refused = await olga.get("/console/workloads/new/check", params=half)
        assert said in unescape(refused.text) and "target.isl" in said

        # "Check again" (the whole page, no script needed) plans it: without a perf worker, the API's words.
        checked = await olga.get("/console/workloads/new", params=form)
        assert checked.status_code == 200
        assert NOT_INSTALLED in _text(re.search(r'id="check-refusal">(.*?)</p>', checked.text, re.S)[1])

        # Creating it: the same words on the form, and every field as typed.
        made = await olga.post("/console/workloads/new", content=urlencode({**form, "csrf": csrf_of(page.text)}),
                               headers={"content-type": "application/x-www-form-urlencoded"})
        assert made.status_code == 503, made.text
        assert NOT_INSTALLED in _text(re.search(r'id="create-error">(.*?)</p>', made.text, re.S)[1])
        assert re.search(r'id="sizing-target" checked', made.text)
        for name, value in _target_fields(TARGET).items():
            assert re.search(rf'name="{re.escape(name)}"[^>]* value="{re.escape(value)}"', made.text), name
        assert 'value="kimi-traffic"' in made.text
        assert (await api.get("/v1/workloads/kimi-traffic", headers=as_("tok-olga"))).status_code == 404


def test_a_plan_on_its_way_shows_the_card_being_planned_and_its_workflow() -> None:
    """Issue 52: the check of a target whose plan is still searched says how far it is, not nothing."""
    planning = Planning(status_url="/v1/workloads/plans/t", workflow_id="traffic-plan/abc",
                        workflow_url="http://ui/namespaces/default/workflows/traffic-plan%2Fabc",
                        cards=["h200", "gb200"], then="GET the status URL until it answers with the plan",
                        progress=PlanProgress(state="searching", planned=["h200"], searching="gb200", seconds=54.2))
    html = templates.env.get_template("_workload_check.html").render(check=Check(planning=planning),
                                                                    refresh_seconds=3)
    text = _text(html)
    assert "AIConfigurator is planning this target on h200, gb200: searching gb200 (1 of 2 cards planned: h200)," \
           " 54 s so far" in text, text
    assert "checks again every 3 s" in text and 'href="http://ui/namespaces/default/workflows/traffic-plan%2Fabc"' \
        in html


def test_the_form_s_query_reads_back_as_the_same_form() -> None:
    """What a create whose plan is on its way redirects to: the form as "Check again" sends it."""
    values = {"artifact_id": ["o/m@" + "a" * 40], "hardware": ["h200"], "sizing": ["target"], "name": ["kimi-t"],
              "features": ["dcp"], **{k: [v] for k, v in _target_fields(TARGET).items()}}
    form = WorkloadForm.read(values)
    again = parse_qs(urlencode(form.query()))
    assert WorkloadForm.read(again) == form

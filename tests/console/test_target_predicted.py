"""The workload page's "predicted and measured" for a workload sized from a traffic target: the prediction
is the configuration AIConfigurator chose for the target (kept on the plan, `sized_by`), at the target's own
ISL/OSL, with the target itself; not the approved draft's estimate at the draft's ISL/OSL. The page is read
over HTTP from the real app on a loopback port, with the registry in a real Postgres; the configuration is
the tool's real answer (tests/perf/fixtures/qwen3-8b-h200-recommend)."""

from __future__ import annotations

import json
from html import unescape

import httpx

from api.app import create_app
from api.auth import TokenTable
from console.predicted import predicted_for
from tests.console.browser import served
from tests.console.conftest import sign_in
from tests.console.test_public_pages import rows
from tests.perf.test_target_sized_plan import sized_plan
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.domain.config import Settings

TOKENS = {"tok-vic": {"name": "vic", "roles": ["viewer"]}}
ARTIFACT, WORKLOAD, DRAFT_ONLY = "Qwen/Qwen3-8B@" + "c" * 40, "qwen-by-target", "qwen-by-replicas"
# What the workload workflow records as the registry's spec (workflows/workload/state.py).
RECORDED = {"hardware", "layout", "variant", "features", "replicas", "served_model_name", "engine", "gpus_per_replica",
            "max_num_seqs", "max_num_seqs_source", "follow", "sized_by"}
# The approved draft's estimate for the same card, at the draft's default ISL/OSL: what a workload sized by
# replicas shows, and what a target-sized one must not.
DRAFT_ROW = {"card": "h200", "mode": "agg", "backend": "vllm", "isl": 4000, "osl": 1000, "ttft_ms": 777.7,
             "tpot_ms": 33.3, "parallelism": "TP8", "concurrency": 64, "source": "AIConfigurator 0.12.0"}


async def _seed(pool, spec: dict, by_replicas: dict) -> None:
    await pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                       "values ($1, 'Qwen/Qwen3-8B', 'main', $2, 'approved', $3, 'olga')",
                       ARTIFACT, "c" * 40, f"artifact/{ARTIFACT}")
    entries = [{**DRAFT_ROW, "layout": layout} for layout in ("pd_cluster", "single_node_tp")]
    await pool.execute("insert into drafts (artifact_id, version, catalog_version, evidence, sizing) "
                       "values ($1, 1, 'test', '{}'::jsonb, $2)", ARTIFACT,
                       {"performance": {"status": "estimated", "entries": entries}})
    for workload_id, workload_spec in ((WORKLOAD, spec), (DRAFT_ONLY, by_replicas)):
        await workload_store.upsert_workload(pool, workload_id=workload_id, artifact_id=ARTIFACT, spec=workload_spec,
                                             state="serving", workflow_id=f"workload/{workload_id}",
                                             requested_by="olga", step="t")


async def test_the_predicted_panel_of_a_target_sized_workload(pg_pool, tmp_path):
    plan = sized_plan("disagg")
    sized = plan.sized_by
    assert sized is not None
    spec = plan.model_dump(mode="json", include=RECORDED)
    by_replicas = {k: v for k, v in spec.items() if k != "sized_by"} | {"layout": "single_node_tp",
                                                                        "max_num_seqs_source": "engine default"}
    await _seed(pg_pool, spec, by_replicas)
    settings = Settings(home=tmp_path / "home", auth_tokens=json.dumps(TOKENS), log_format="json")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens), db=pg_pool)
    async with served(app) as base, httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as vic:
        await sign_in(vic, "tok-vic")
        page = await vic.get(f"/console/workloads/{WORKLOAD}")
        assert page.status_code == 200, page.text
        html = unescape(page.text)
        figures = rows(page.text, "figure")
        conf = sized.configuration
        assert f"{conf.ttft_ms:.1f} ms" in figures["ttft"] and f"{conf.tpot_ms:.1f} ms" in figures["tpot"]
        assert f"{DRAFT_ROW['ttft_ms']:.1f} ms" not in html  # not the draft's estimate
        target = sized.target
        assert (f"Sized by the traffic target: {target.requests_per_second:g} requests per second, ISL {target.isl} / "
                f"OSL {target.osl}, time to first token ≤ {target.ttft_ms:.1f} ms, time per output token ≤ "
                f"{target.tpot_ms:.1f} ms, which needed {sized.replicas} replicas ({sized.gpus} GPUs).") in html
        assert f"Predicted at ISL {target.isl} / OSL {target.osl}, disagg, {conf.parallelism}" in html
        assert "the configuration AIConfigurator chose for this workload's traffic target" in html

        # A workload sized by replicas still shows the approved draft's estimate, at the draft's ISL/OSL.
        other = unescape((await vic.get(f"/console/workloads/{DRAFT_ONLY}")).text)
        assert f"{DRAFT_ROW['ttft_ms']:.1f} ms" in other and "Sized by the traffic target" not in other
        assert f"Predicted at ISL {DRAFT_ROW['isl']} / OSL {DRAFT_ROW['osl']}" in other


def test_a_spec_with_an_unreadable_sizing_falls_back_to_the_draft():
    spec = {"hardware": "h200", "layout": "single_node_tp", "sized_by": {"target": "garbled"},
            "max_num_seqs_source": "AIConfigurator"}
    draft = {"sizing": {"performance": {"status": "estimated", "entries": [{**DRAFT_ROW, "layout": "single_node_tp"}]}}}
    predicted = predicted_for(draft, spec)
    assert predicted is not None and predicted.target is None and predicted.sized_by_target
    assert predicted.row is not None and predicted.row.ttft_ms == DRAFT_ROW["ttft_ms"]

"""A draft's rows keep the latency targets they were estimated under and say whether their figures meet them
(AIConfigurator reports its best configuration even when it misses the targets it was asked for). The
figures are one real `aiconfigurator cli recommend` run (tests/perf/fixtures/qwen3-8b-h200-recommend), read
by the adapter's own parsers; the targets are set around those figures, never a figure repeated here. Pure:
no AIConfigurator search, Temporal or database."""

from __future__ import annotations

import pandas as pd

from api.services.estimates import with_performance
from tests.perf.test_disaggregated_plan import CARD, FIXTURE, MODEL, TARGET, _rows
from wingsmith.adapters.perf.aiconfigurator import configuration_from_row, frontier_of
from wingsmith.domain.draft_performance import DraftPerformance, PerformanceRow, rows_of
from wingsmith.domain.perf.estimates import (
    DEFAULT_TPOT_MS,
    DEFAULT_TTFT_MS,
    MODES,
    Estimate,
    EstimateRequest,
    PerformanceEntry,
    Source,
)

SOURCE = Source(version="0.12.0", database="h200_sxm vllm 0.24.0")


def _estimate(ttft_ms: float | None, tpot_ms: float | None) -> Estimate:
    """The run's best row per mode, as the adapter hands it to the draft, asked under these targets."""
    request = EstimateRequest(model=MODEL, card=CARD, isl=TARGET.isl, osl=TARGET.osl, ttft_ms=ttft_ms, tpot_ms=tpot_ms)
    entries = [PerformanceEntry(card=CARD, layout=request.layout, mode=mode, backend="vllm", isl=request.isl,
                                osl=request.osl, source=SOURCE,
                                configuration=configuration_from_row(mode, _rows(mode)[0], 8)) for mode in MODES]
    return Estimate(request=request, entries=entries)


def test_rows_meet_the_targets_they_were_asked_under():
    [agg, disagg] = rows_of([_estimate(TARGET.ttft_ms, TARGET.tpot_ms)])
    for row in (agg, disagg):
        assert (row.ttft_target_ms, row.tpot_target_ms) == (TARGET.ttft_ms, TARGET.tpot_ms)
        assert row.ttft_ms is not None and row.tpot_ms is not None
        assert row.ttft_ms <= TARGET.ttft_ms and row.tpot_ms <= TARGET.tpot_ms, "the run met what it was asked"
        assert row.meets_targets is True and row.missed == []
    shown = row.model_dump(mode="json")
    assert shown["meets_targets"] is True and shown["tpot_target_ms"] == TARGET.tpot_ms


def test_a_row_that_misses_its_tpot_target_says_by_how_much():
    agg_tpot = float(_rows("agg")[0]["tpot"])
    tight = agg_tpot / 2  # a target the tool's best agg configuration cannot meet
    [agg, _disagg] = rows_of([_estimate(TARGET.ttft_ms, tight)])
    assert agg.meets_targets is False
    [missed] = agg.missed
    assert (missed.name, missed.figure_ms, missed.target_ms) == ("TPOT", agg.tpot_ms, tight)
    assert str(missed) == f"misses the TPOT target ({agg_tpot:,.0f} ms against {tight:,.0f} ms)"
    # Both targets missed: both said.
    agg_ttft = float(_rows("agg")[0]["ttft"])
    [both, _] = rows_of([_estimate(agg_ttft / 2, tight)])
    assert [m.name for m in both.missed] == ["TTFT", "TPOT"] and both.meets_targets is False


def test_without_asked_targets_a_row_carries_the_tool_defaults_it_ran_under():
    [agg, _] = rows_of([_estimate(None, None)])
    assert (agg.ttft_target_ms, agg.tpot_target_ms) == (DEFAULT_TTFT_MS, DEFAULT_TPOT_MS)
    assert agg.meets_targets is ((agg.ttft_ms or 0) <= DEFAULT_TTFT_MS and (agg.tpot_ms or 0) <= DEFAULT_TPOT_MS)


def test_rows_saved_before_targets_were_kept_still_decode_and_claim_nothing():
    [agg, _] = rows_of([_estimate(TARGET.ttft_ms, TARGET.tpot_ms)])
    stored = agg.model_dump(mode="json")
    for field in ("ttft_target_ms", "tpot_target_ms", "meets_targets"):
        stored.pop(field)
    old = PerformanceRow.model_validate(stored)
    assert old.meets_targets is None and old.missed == [], "unknown targets: neither met nor missed"
    # A row without figures meets nothing either, whatever its targets.
    reason = PerformanceRow(card=CARD, layout="single_node_tp", mode="agg", backend="vllm", isl=1, osl=1,
                            reason="no agg configuration", ttft_target_ms=1.0, tpot_target_ms=1.0)
    assert reason.meets_targets is None


def test_the_api_draft_json_shows_the_targets_and_the_verdict():
    [agg, disagg] = rows_of([_estimate(TARGET.ttft_ms, float(_rows("agg")[0]["tpot"]) / 2)])
    stored = DraftPerformance(status="estimated", entries=[agg, disagg]).model_dump(mode="json")
    draft = with_performance({"sizing": {"performance": stored}})
    shown = {r["mode"]: r for r in draft["performance"]}
    assert shown["agg"]["meets_targets"] is False and shown["agg"]["tpot_target_ms"] == agg.tpot_target_ms
    assert shown["disagg"]["meets_targets"] is disagg.meets_targets


def test_the_frontier_keeps_each_configuration_s_latencies():
    for mode in MODES:
        frame = pd.read_csv(FIXTURE / mode / "best_config_topn.csv")
        points = frontier_of(frame)
        expected = sorted(zip(frame["tokens/s/user"], frame["ttft"], frame["tpot"], strict=True))
        assert [(p.tokens_per_second_per_user, p.ttft_ms, p.tpot_ms) for p in points] == expected

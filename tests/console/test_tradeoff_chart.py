"""The draft's throughput trade-off picture (issue 36 part 3), pure: each configuration sits where its
figures say on the axes the picture labels, aggregated and disaggregated differ by shape and dash, the
recommended configuration (the highest throughput per GPU, as AIConfigurator's CLI chooses) is ringed and
named, and a draft without figures says why in words. Everything from outside is escaped and bounded;
nothing that is not a finite number reaches the SVG."""

from __future__ import annotations

import math
import re

from console.charts import MAX_PLOTTED, PLOT_LEFT, PLOT_RIGHT, PLOT_TOP, WIDTH, XY_HEIGHT
from console.tradeoff import MAX_REASONS, MAX_WORDS, by_card, draft_tradeoff, tradeoff_chart, tradeoff_view
from wingsmith.domain.draft_performance import NOT_INSTALLED, PENDING, PerformanceRow
from wingsmith.domain.perf.estimates import FrontierPoint

AGG_FRONTIER = ((25.0, 3578.7), (34.5, 3284.8), (366.6, 401.3))
SOURCE = "AIConfigurator 0.12.0, database h200_sxm vllm 0.24.0"


def row(layout: str, mode: str, per_gpu: float, per_user: float, card: str = "h200", **extra) -> PerformanceRow:
    return PerformanceRow(card=card, layout=layout, mode=mode, backend="vllm", isl=4000, osl=1000,
                          tokens_per_second_per_gpu=per_gpu, tokens_per_second_per_user=per_user, ttft_ms=250.0,
                          tpot_ms=29.0, concurrency=96, gpus=8, parallelism=extra.pop("parallelism", "TP1"),
                          source=SOURCE, **extra)


def unsupported(layout: str, mode: str, reason: str, card: str = "h200") -> PerformanceRow:
    return PerformanceRow(card=card, layout=layout, mode=mode, backend="vllm", isl=4000, osl=1000, reason=reason)


def frontier(*pairs: tuple[float, float]) -> list[FrontierPoint]:
    return [FrontierPoint(tokens_per_second_per_user=u, tokens_per_second_per_gpu=g) for u, g in pairs]


def ticks(svg: str) -> tuple[float, float]:
    """The largest tick of each axis, read from the labels the picture draws (x below the plot, y left)."""
    labels = re.findall(r'<text class="label" x="([\d.]+)" y="([\d.]+)" text-anchor="(end|middle)">([\d,.]+)</text>',
                        svg)
    xs = [float(t.replace(",", "")) for _, _, anchor, t in labels if anchor == "middle"]
    ys = [float(t.replace(",", "")) for _, _, anchor, t in labels if anchor == "end"]
    return max(xs), max(ys)


def placed(svg: str, per_user: float, per_gpu: float) -> tuple[float, float]:
    """Where a point with these figures belongs on this picture's axes, in SVG units."""
    x_top, y_top = ticks(svg)
    width = WIDTH - PLOT_LEFT - PLOT_RIGHT
    return PLOT_LEFT + per_user / x_top * width, PLOT_TOP + XY_HEIGHT - per_gpu / y_top * XY_HEIGHT


def circles(svg: str, css: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(rf'<circle class="{css}" cx="([\d.]+)" cy="([\d.]+)"', svg)]


def squares(svg: str, css: str) -> list[tuple[float, float]]:
    """A square marker's centre (it is drawn 8 units wide from its corner)."""
    return [(float(x) + 4, float(y) + 4)
            for x, y in re.findall(rf'<rect class="{css}" x="([\d.-]+)" y="([\d.-]+)" width="8"', svg)]


def near(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return math.dist(a, b) < 0.2


def test_each_configuration_sits_where_its_figures_say_and_the_best_is_ringed():
    rows = [row("single_node_tp", "agg", 3284.8, 34.5, frontier=frontier(*AGG_FRONTIER)),
            row("single_node_tp", "disagg", 2801.4, 33.8, parallelism="prefill 3 × TP1, decode 5 × TP1",
                frontier=frontier((32.2, 2819.8), (33.8, 2801.4), (333.6, 115.0))),
            row("multi_node_tp", "agg", 3500.2, 41.0, parallelism="TP2"),
            row("multi_node_tp", "disagg", 2100.0, 120.5)]
    [card] = by_card(rows)
    assert card.recommended is rows[2], "the highest throughput per GPU is AIConfigurator's choice"
    svg = str(tradeoff_chart(card))
    agg = circles(svg, "dot series-0")
    disagg = squares(svg, "dot series-2")
    assert len(agg) == 2 and len(disagg) == 2, "one marker per layout and mode, circles and squares"
    for r in rows:
        where = placed(svg, r.tokens_per_second_per_user, r.tokens_per_second_per_gpu)
        assert any(near(where, p) for p in (agg if r.mode == "agg" else disagg)), (r.layout, r.mode, where)
    ring = circles(svg, "callout")
    assert len(ring) == 1 and near(ring[0], placed(svg, 41.0, 3500.2))
    assert "recommended: aggregated, TP2</text>" in svg
    # The axes name their units; the picture has a name and a description for screen readers.
    assert "throughput per user (tokens/s per user)" in svg and "throughput per GPU (tokens/s per GPU)" in svg
    assert re.search(r'role="img" aria-labelledby="(chart-\d+)" aria-describedby="\1-desc"', svg)
    assert "Recommended: aggregated, TP2 on Multi-Node Tensor Parallel, 3,500 tokens/s per GPU" in svg


def test_the_recommended_layouts_frontiers_are_lines_solid_and_dashed():
    rows = [row("single_node_tp", "agg", 3284.8, 34.5, frontier=frontier(*AGG_FRONTIER)),
            row("single_node_tp", "disagg", 2801.4, 33.8, frontier=frontier((333.6, 115.0), (32.2, 2819.8))),
            row("multi_node_tp", "agg", 1000.0, 20.0, frontier=frontier((10.0, 1100.0), (20.0, 1000.0)))]
    svg = str(tradeoff_chart(by_card(rows)[0]))
    lines = re.findall(r'<polyline class="line (series-\d)" points="([^"]+)"( stroke-dasharray="[^"]+")?>', svg)
    assert [(css, bool(dash)) for css, _, dash in lines] == [("series-0", False), ("series-2", True)], \
        "only the recommended layout's frontiers: aggregated solid, disaggregated dashed"
    agg_line = [tuple(map(float, p.split(","))) for p in lines[0][1].split()]
    expected = [placed(svg, u, g) for u, g in AGG_FRONTIER]
    assert all(near(a, b) for a, b in zip(agg_line, expected, strict=True))
    disagg_line = [tuple(map(float, p.split(","))) for p in lines[1][1].split()]
    assert disagg_line[0][0] < disagg_line[1][0], "a frontier is drawn left to right, whatever its order"
    # The legend draws each key with its series' dash and shape.
    assert svg.count('stroke-dasharray="7 4"') == 2


def test_cards_each_get_their_picture_and_rows_without_figures_keep_their_words():
    mi = "AIConfigurator has no performance database for MI355X (AMD)"
    rows = [row("single_node_tp", "agg", 3000.0, 30.0),
            unsupported("single_node_tp", "disagg", "no disagg configuration within 8 GPUs meets TTFT ≤ 2000 ms"),
            unsupported("single_node_tp", "agg", "AIConfigurator 0.12.0 does not support agg serving", card="gb200"),
            unsupported("single_node_tp", "disagg", "AIConfigurator 0.12.0 does not support disagg serving",
                        card="gb200")]
    view = tradeoff_view(rows, None)
    assert [c.card for c in view.cards] == ["h200", "gb200"]
    assert view.why_none is None
    assert str(view.pictures["h200"]).startswith('<figure class="chart">')
    assert view.pictures["gb200"] == "", "no figures, no picture: the table says why"
    gb200 = view.cards[1].table
    assert [t.reason for t in gb200] == [r.reason for r in rows[2:]]
    h200 = view.cards[0].table
    assert h200[0].recommended and h200[0].per_gpu == "3,000" and h200[0].per_user == "30.0"
    assert h200[1].reason.startswith("no disagg configuration") and not h200[1].recommended
    # A card nobody can estimate at all.
    alone = tradeoff_view([unsupported("single_node_tp", m, mi, card="h100") for m in ("agg", "disagg")], None)
    assert alone.why_none == f"AIConfigurator gave no figures for this draft: {mi}"
    long_reasons = [unsupported("multi_node_tp", "agg", f"reason {card}" + "x" * 1000, card=card)
                    for card in ("h100", "h200", "b300")]
    many = tradeoff_view(long_reasons + [unsupported("single_node_tp", m, f"{mi} {m}", card="b200")
                                         for m in ("agg", "disagg")], None)
    assert many.why_none is not None and many.why_none.endswith("(and 1 more in the tables)")
    assert len(many.why_none) < (MAX_WORDS + 2) * MAX_REASONS + 100


def test_a_draft_without_figures_says_why():
    assert tradeoff_view([], NOT_INSTALLED).why_none == NOT_INSTALLED
    pending = draft_tradeoff({"performance": [], "performance_status": "pending", "performance_reason": PENDING})
    assert pending.why_none == PENDING and pending.cards == []
    assert tradeoff_view([], None).why_none == "the draft holds no performance estimate"


def test_words_and_numbers_from_outside_cannot_break_the_picture():
    hostile = '<script>alert(1)</script>"&'
    rows = [row("single_node_tp", "agg", 3000.0, 30.0, parallelism=hostile,
                frontier=frontier((math.nan, 10.0), (math.inf, 5.0), (-1.0, 3.0), (10.0, 3100.0), (30.0, 3000.0))),
            row("single_node_tp", "disagg", math.inf, 30.0),
            row("multi_node_tp", "agg", math.nan, 12.0),
            unsupported("multi_node_tp", "disagg", "x" * 10_000 + hostile)]
    [card] = by_card(rows)
    assert card.recommended is rows[0], "a row whose figures are not finite numbers cannot be chosen"
    svg = str(tradeoff_chart(card))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert not re.search(r"nan|inf", svg.replace("information", ""), flags=re.I), "only finite numbers are drawn"
    assert len(circles(svg, "dot series-0")) == 1 and squares(svg, "dot series-2") == []
    line = re.search(r'<polyline class="line series-0" points="([^"]+)"', svg)
    assert line and len(line.group(1).split()) == 2, "points that are NaN, infinite or negative are left out"
    table = card.table
    assert [t.reason is not None for t in table] == [False, True, True, True]
    assert len(table[3].reason) == MAX_WORDS and table[3].reason.endswith("…")
    assert table[0].parallelism == hostile, "the table cell is escaped by the template, not mangled here"


def test_a_frontier_longer_than_a_picture_can_show_is_cut():
    many = frontier(*((float(i), 4000.0 - i) for i in range(1, 1001)))
    svg = str(tradeoff_chart(by_card([row("single_node_tp", "agg", 3990.0, 10.0, frontier=many)])[0]))
    line = re.search(r'<polyline class="line series-0" points="([^"]+)"', svg)
    assert line and len(line.group(1).split()) == MAX_PLOTTED


# -- rows that miss the latency targets they were estimated under ------------------------------------------
# One real `aiconfigurator cli recommend` run (tests/perf/fixtures/qwen3-8b-h200-recommend): its agg rows,
# read by the adapter's parsers, stand for one card's configurations; the TPOT target is set between their
# figures, so some meet it and some miss it, as DeepSeek-V3 on GB200 misses 30 ms.


def _fixture_rows(tpot_target: float) -> list[PerformanceRow]:
    from tests.perf.test_disaggregated_plan import TARGET, _rows
    from wingsmith.adapters.perf.aiconfigurator import configuration_from_row
    layouts = ("single_node_tp", "multi_node_tp", "single_node_dep", "multi_node_dep")
    found = []
    for layout, raw in zip(layouts, _rows("agg"), strict=False):
        conf = configuration_from_row("agg", raw, None)
        found.append(PerformanceRow(card="h200", layout=layout, mode="agg", backend="vllm", isl=TARGET.isl,
                                    osl=TARGET.osl, tokens_per_second_per_gpu=conf.tokens_per_second_per_gpu,
                                    tokens_per_second_per_user=conf.tokens_per_second_per_user, ttft_ms=conf.ttft_ms,
                                    tpot_ms=conf.tpot_ms, gpus=conf.gpus, parallelism=conf.parallelism,
                                    source=SOURCE, ttft_target_ms=TARGET.ttft_ms, tpot_target_ms=tpot_target))
    return found


def _fixture_frontier() -> list[FrontierPoint]:
    import pandas as pd

    from tests.perf.test_disaggregated_plan import FIXTURE
    from wingsmith.adapters.perf.aiconfigurator import frontier_of
    return frontier_of(pd.read_csv(FIXTURE / "agg" / "best_config_topn.csv"))


def _split_target(rows: list[PerformanceRow]) -> float:
    """A TPOT target between the rows' figures: the fastest-per-GPU row misses it, at least one row meets it."""
    tpots = sorted(r.tpot_ms for r in rows)
    best = max(rows, key=lambda r: r.tokens_per_second_per_gpu).tpot_ms
    below = [t for t in tpots if t < best]
    assert below, "the run has a row with a lower TPOT than its fastest-per-GPU one"
    return (below[-1] + best) / 2


def test_rows_that_miss_their_targets_are_hollow_and_the_recommendation_meets_them():
    target = _split_target(_fixture_rows(1.0))
    rows = _fixture_rows(target)
    meeting = [r for r in rows if r.tpot_ms <= target and r.ttft_ms <= r.ttft_target_ms]
    missing = [r for r in rows if r not in meeting]
    assert meeting and missing
    [card] = by_card(rows)
    assert card.recommended is max(meeting, key=lambda r: r.tokens_per_second_per_gpu), \
        "the highest throughput per GPU among the rows that meet the targets, not the fastest overall"
    assert not card.none_meets
    svg = str(tradeoff_chart(card))
    filled, hollow = circles(svg, "dot series-0"), circles(svg, "dot series-0 hollow")
    assert len(filled) == len(meeting) and len(hollow) == len(missing)
    for r in missing:
        assert any(near(placed(svg, r.tokens_per_second_per_user, r.tokens_per_second_per_gpu), p) for p in hollow)
    assert "aggregated: misses the latency target</text>" in svg, "the legend names the hollow markers"
    assert circles(svg, "key dot series-0 hollow"), "and draws its key hollow"
    assert f"{len(missing)} of them miss their latency targets (drawn hollow)" in svg
    table = {t.layout: t for t in card.table}
    for r in rows:
        words = table[r.layout].targets
        if r in missing:
            assert words == f"misses the TPOT target ({r.tpot_ms:,.0f} ms against {target:,.0f} ms)"
            assert table[r.layout].misses
        else:
            assert words == f"meets TTFT ≤ {r.ttft_target_ms:,.0f} ms, TPOT ≤ {target:,.0f} ms"


def test_when_no_row_meets_its_targets_the_picture_and_the_table_say_so():
    rows = _fixture_rows(min(r.tpot_ms for r in _fixture_rows(1.0)) / 2)
    [card] = by_card(rows)
    assert card.none_meets and card.recommended is max(rows, key=lambda r: r.tokens_per_second_per_gpu)
    assert card.none_meets_words.startswith("no configuration AIConfigurator found on ")
    svg = str(tradeoff_chart(card))
    assert circles(svg, "dot series-0") == [] and len(circles(svg, "dot series-0 hollow")) == len(rows)
    assert "recommended, though it misses the latency targets (none meets them)" in svg
    assert "Careful: no configuration AIConfigurator found on" in svg


def test_the_frontier_within_the_targets_is_drawn_apart_from_the_rest():
    points = _fixture_frontier()
    target = _split_target(_fixture_rows(1.0))
    rows = _fixture_rows(target)
    chosen = by_card(rows)[0].recommended
    assert chosen is not None
    # The frontier drawn is the recommended layout's: the run's frontier is given to that row.
    [card] = by_card([r.model_copy(update={"frontier": points}) if r is chosen else r for r in rows])
    svg = str(tradeoff_chart(card))
    lines = dict(re.findall(r'<polyline class="line (series-\d)" points="([^"]+)"', svg))
    within = [p for p in points if p.tpot_ms <= target and p.ttft_ms <= card.recommended.ttft_target_ms]
    assert 0 < len(within) < len(points)
    # The whole frontier in grey, its part within the targets in the mode's colour over it.
    assert len(lines["series-4"].split()) == len(points) and len(lines["series-0"].split()) == len(within)
    assert svg.index('class="line series-4"') < svg.index('class="line series-0"'), "grey first, under the colour"
    drawn = [tuple(map(float, xy.split(","))) for xy in lines["series-0"].split()]
    assert all(any(near(placed(svg, p.tokens_per_second_per_user, p.tokens_per_second_per_gpu), d) for d in drawn)
               for p in within)
    assert "within the latency targets</text>" in svg and "beyond the latency targets</text>" in svg

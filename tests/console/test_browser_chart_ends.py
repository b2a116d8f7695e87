"""Every console chart stays readable at the smallest and the largest data a real plane produces (issue 52),
measured in Chromium: each picture drawn by the console's own code (the functions the pages call) with
the console's stylesheet, then its words' boxes read from the browser. At both ends, in every picture:
no word outside its picture, no two words on top of each other, no label cut short; in the time charts no
word over the plot (the unit of a share of traffic once sat on its 100 % line); the throughput trade-off's
recommended point on the frontier line it is ringed on (Kimi-K3's real estimate, whose pick lay off it),
its legend inside the picture; an upgrade with a short dwell draws its dozens of decisions as a counted
band, not a barcode of lines over the traffic shares. A screenshot of each end is kept under test-output/.

Smallest: one cluster of one GPU, one variant, one reading, one configuration without a frontier, an
upgrade just started. Largest: sixty clusters with long names and thousands of GPUs, six variants on
multi-node shapes, an hour of readings in the thousands, seven layouts in two modes with full frontiers,
three clusters upgraded in ten steps with a two-second dwell (ninety decisions, holds and a rollback)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

from markupsafe import Markup

from console.clusters import ClusterView, gpu_chart
from console.memory import MemoryRow, memory_chart
from console.time_charts import MAX_MARK_LINES
from console.tradeoff import tradeoff_view
from console.traffic_charts import backend_view
from console.upgrade_timeline import upgrade_timelines
from tests.console.browser import chromium, served
from tests.console.test_tradeoff_chart import row as perf_row
from tests.gateway.test_traffic_history import counters, spans_of
from wingsmith.domain.draft_performance import PerformanceRow
from wingsmith.domain.perf.estimates import MAX_FRONTIER_POINTS, FrontierPoint

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots" / "charts"
KIMI = Path(__file__).parent / "fixtures" / "kimi-k3-h200-performance.json"
T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
LAYOUTS = ("single_node_tp", "multi_node_tp", "multi_node_tep", "multi_node_tp_pp", "multi_node_dep", "pd_cluster",
           "multi_node_tp_dp")

# Every <svg class="chart"> of the page: its box, its words' boxes (with their text), its plot (the two first
# axis lines: the y axis, then the x axis), the ring and the lines of an xy plot, in the picture's own units.
MEASURE = """() => [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = r => { const b = r.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const axes = [...svg.querySelectorAll('line.axis')].slice(0, 2).map(box);
  const ring = svg.querySelector('circle.callout');
  const words = t => { const lines = [...t.querySelectorAll('tspan')].map(s => s.textContent);
                       return lines.length ? lines.join(' ') : t.textContent; };
  return {
    title: svg.querySelector('title').textContent,
    box: box(svg),
    texts: [...svg.querySelectorAll(':scope > text')].map(t => ({words: words(t), box: box(t),
                                                                  label: t.getAttribute('data-label')})),
    plot: axes.length == 2 ? [axes[0][0], axes[0][1], axes[1][2], axes[1][3]] : null,
    ring: ring ? [+ring.getAttribute('cx'), +ring.getAttribute('cy')] : null,
    lines: [...svg.querySelectorAll('polyline')].map(l => l.getAttribute('points').trim().split(/\\s+/)
                                                          .map(p => p.split(',').map(Number))),
    markLines: svg.querySelectorAll('line.mark').length,
    bands: [...svg.querySelectorAll('rect.mark-band')].map(b => +b.getAttribute('data-marks')),
  };
})"""
SLACK = 0.5  # px: a box may touch another, or its picture's edge


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - SLACK and b[0] < a[2] - SLACK and a[1] < b[3] - SLACK and b[1] < a[3] - SLACK


def _inside(a: list[float], b: list[float]) -> bool:
    return a[0] >= b[0] - SLACK and a[1] >= b[1] - SLACK and a[2] <= b[2] + SLACK and a[3] <= b[3] + SLACK


def _to_segment(p: tuple[float, float], a: list[float], b: list[float]) -> float:
    (px, py), (ax, ay), (bx, by) = p, a, b
    length = (bx - ax) ** 2 + (by - ay) ** 2
    t = 0.0 if length == 0 else max(0.0, min(1.0, ((px - ax) * (bx - ax) + (py - ay) * (by - ay)) / length))
    return math.dist(p, (ax + t * (bx - ax), ay + t * (by - ay)))


def readability_problems(chart: dict, *, time_chart: bool) -> list[str]:
    """What makes one measured picture hard to read, in words (nothing: it reads)."""
    name, found = chart["title"][:60], []
    texts = [t for t in chart["texts"] if t["words"].strip()]
    for t in texts:
        if not _inside(t["box"], chart["box"]):
            found.append(f"{name}: {t['words']!r} leaves the picture ({t['box']} outside {chart['box']})")
        if "…" in t["words"]:
            found.append(f"{name}: {t['words']!r} is cut short")
        if t["label"] is not None and "".join(t["label"].split()) != "".join(t["words"].split()):
            found.append(f"{name}: the label {t['label']!r} reads {t['words']!r}")
        if time_chart and chart["plot"] and _overlap(t["box"], chart["plot"]):
            found.append(f"{name}: {t['words']!r} is written over the plot {chart['plot']}")
    for i, a in enumerate(texts):
        found += [f"{name}: {a['words']!r} overlaps {b['words']!r}" for b in texts[i + 1:]
                  if _overlap(a["box"], b["box"])]
    return found


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# -- the data at both ends ---------------------------------------------------------------------------

def _cluster(name: str, gpus: int, free: int, card: str = "H200") -> ClusterView:
    return ClusterView(name=name, region="", labels={}, cordoned=False, cards=[(card, gpus)], gpus_total=gpus,
                       gpus_free=free, inventory_source="manual", inventory_error=None, deployments=[],
                       health="idle", health_words="")


def fleet_charts() -> dict[str, Markup]:
    largest = [_cluster(f"{region}-{'gpu-pool-' * 4}{i:02d}"[:63], 8192 - 8 * i, 37 * i % 8192, card)
               for i, (region, card) in enumerate((r, c) for r in ("us-east-1", "eu-west-4", "ap-southeast-2")
                                                  for c in ("H200", "B200", "GB200 NVL4", "GB300 NVL4", "H100",
                                                            "B300", "H200", "B200", "H100", "GB200 NVL4",
                                                            "B300", "H200", "B200", "H100", "B300", "H200",
                                                            "B200", "H100", "GB300 NVL4", "H200"))]
    return {"smallest": gpu_chart([_cluster("a", 1, 0)]), "largest": gpu_chart(largest)}


def memory_charts() -> dict[str, Markup]:
    def variant(name: str, shape: str, weights: float, card: float | None, floor: float | None) -> MemoryRow:
        return MemoryRow(variant=name, shape=shape, parts=[("weights", weights), ("KV cache", 4.2),
                                                           ("activations", 1.1), ("runtime overhead", 2.0)],
                         budget_gb=(card or 80) * 0.9, card_gb=card, published_per_gpu_gb=floor, fits=True)
    largest = [variant("default", "16 × H200, Multi-Node Tensor Parallel", 98.4, 141, 105.0),
               variant("nvfp4", "8 × GB300 NVL4, Multi-Node Tensor + Expert Parallel", 141.0, 288, 150.0),
               variant("int4-w4a16-experts", "16 × GB200 NVL4, Multi-Node Data + Expert Parallel", 51.0, 186, 60.1),
               variant("fp8-dynamic", "16 × H100, Multi-Node TP + Pipeline Parallel", 66.0, 80, None),
               variant("mxfp4", "24 × B200, Prefill/Decode Disaggregation", 72.2, 180, 88.0),
               variant("bf16", "32 × B300, Multi-Node TP + Data Parallel", 101.0, 268, 119.9)]
    assert max(len(f"{r.variant} · {r.shape}") for r in largest) > 38, "longer than the 38 characters once shown"
    return {"smallest": memory_chart([variant("default", "1 × H100, Tensor Parallel", 0.5, 80, 0.6)]),
            "largest": memory_chart(largest)}


def traffic_charts() -> dict[str, Markup]:
    one = backend_view("sim-a/w", spans_of([(0, counters(0)), (10, counters(1))]), at(-3590), at(10))
    # A busy hour: up to 14,000 requests per second, a few per cent of them failing, slow answers.
    hour = spans_of([(20 * k, counters(200_000 * k + 40 * k * k, failures=5_000 * k, fast=20_000 * k))
                     for k in range(0, 181)])
    busy = backend_view(f"{'eu-west-4-gpu-pool-' * 3}07/{'kimi-k3-long-context-' * 2}serving/r12", hour, at(0),
                        at(3600), predicted_ttft_ms=950.0)
    return {"smallest": Markup(one.rate_chart + one.latency_chart),
            "largest": Markup(busy.rate_chart + busy.latency_chart)}


def _judgment(n: int, seconds: float, cluster: str, percent: int, verdict: str) -> dict:
    figures = {"new_requests": 3, "old_requests": 41, "new_error_rate": 0.0 if verdict != "bad" else 0.33,
               "old_error_rate": 0.0, "new_p99_seconds": 0.21, "old_p99_seconds": 0.18}
    return {"kind": "workload_upgrade_step", "step": f"upgrade:1:{cluster}:{percent}:{n}", "at": at(seconds),
            "detail": {"cluster": cluster, "percent": percent, "healthy": verdict != "bad",
                       "enough_traffic": verdict != "light", "figures": figures,
                       "failures": ["error rate 33.3% vs 0.0% (over +1.0%)"] if verdict == "bad" else []}}


def upgrade_charts() -> dict[str, Markup]:
    clusters = ["us-east-1-gpu-pool-a", "eu-west-4-gpu-pool-b", "ap-southeast-2-gpu-pool-c"]
    started = {"kind": "workload_upgrade_started", "step": "upgrade:1:started", "at": at(0),
               "detail": {"from": "org/m@a", "to": "org/m@b", "clusters": clusters,
                          "steps": list(range(10, 101, 10)), "dwell_seconds": 2}}
    events, t, n = [started], 0.0, 0
    for c, cluster in enumerate(clusters):
        for percent in range(10, 101, 10):
            for verdict in ("light", "light", "bad" if (c, percent) == (2, 100) else "healthy"):
                t, n = t + 2, n + 1
                events.append(_judgment(n, t, cluster, percent, verdict))
            if percent == 50:
                t += 1
                events.append({"kind": "workload_upgrade_paused", "step": f"upgrade:1:paused:{c}", "at": at(t),
                               "detail": {"reason": "no request reached the new version in 10 windows"}})
    events.append({"kind": "workload_upgrade_rolled_back", "step": "upgrade:1:rolled_back", "at": at(t + 1),
                   "detail": {"failures": [f"{clusters[2]} at 100 %: error rate 33.3% vs 0.0% (over +1.0%)"]}})
    [crowded] = upgrade_timelines(events, None, None, at(t + 5))
    assert len(crowded.decisions) == 90
    [just] = upgrade_timelines([{**started, "detail": {**started["detail"], "clusters": ["a"]}}], None,
                               {"state": "running"}, at(3))
    return {"smallest": Markup(just.weight_chart + just.error_chart + just.latency_chart),
            "largest": crowded.weight_chart + Markup('<div class="multiples">') + crowded.error_chart
            + crowded.latency_chart + Markup("</div>")}


def _frontier(per_user: float, per_gpu: float) -> list[FrontierPoint]:
    """A full frontier (MAX_FRONTIER_POINTS) through the configuration's own point, shaped as the tool's are:
    throughput per GPU falling as each user gets more, a token every 1000/x ms."""
    users = [5 * 1.07 ** i for i in range(MAX_FRONTIER_POINTS - 1)] + [per_user]
    return [FrontierPoint(tokens_per_second_per_user=u, tokens_per_second_per_gpu=per_gpu * (per_user / u) ** 0.7,
                          ttft_ms=350 + u, tpot_ms=1000 / u) for u in sorted(users)]


def tradeoff_charts() -> dict[str, Markup]:
    smallest = tradeoff_view([perf_row("single_node_tp", "agg", 3.2, 1.1)], None)
    kimi = tradeoff_view([PerformanceRow.model_validate(r) for r in json.loads(KIMI.read_text())["rows"]], None)
    rows = []
    for i, layout in enumerate(LAYOUTS):
        for mode in ("agg", "disagg"):
            per_gpu, per_user = 4_100.0 - 310 * i - (900 if mode == "disagg" else 0), 30.0 + 17 * i
            rows.append(perf_row(layout, mode, per_gpu, per_user, ttft_target_ms=2000.0,
                                 tpot_target_ms=30.0 if i % 3 else 20.0,
                                 parallelism="prefill 3 × TP2 PP1 DP2 MoE TP4, decode 5 × TP4 PP2 DP1 MoE EP8"
                                 if mode == "disagg" else "TP8 PP2 DP2 MoE TP16 EP4",
                                 frontier=_frontier(per_user, per_gpu)))
    largest = tradeoff_view(rows, None)
    return {"smallest": smallest.pictures["h200"], "kimi-k3": kimi.pictures["h200"],
            "largest": largest.pictures["h200"]}


PICTURES = {"fleet": (fleet_charts, False), "memory": (memory_charts, False), "traffic": (traffic_charts, True),
            "upgrade": (upgrade_charts, True), "tradeoff": (tradeoff_charts, False)}


async def test_every_chart_reads_at_both_ends(offline_app):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    measured: dict[str, list[dict]] = {}
    async with served(offline_app) as base, chromium() as browser:
        page = await browser.new_page(viewport={"width": 1360, "height": 900})
        await page.goto(f"{base}/console/login")  # the console's origin: its stylesheet loads as on a page
        for name, (draw, time_chart) in PICTURES.items():
            for end, charts in draw().items():
                await page.set_content(f'<html><head><link rel="stylesheet" href="{base}/console/static/console.css">'
                                       f"</head><body><main><h1>{name}, {end}</h1>{charts}</main></body></html>",
                                       wait_until="load")
                found = await page.evaluate(MEASURE)
                assert found, f"{name} ({end}) drew no picture"
                measured[f"{name}-{end}"] = found
                for chart in found:
                    problems += [f"{name} ({end}) {p}" for p in readability_problems(chart, time_chart=time_chart)]
                await page.locator("main").screenshot(path=str(SCREENSHOTS / f"{name}-{end}.png"))
    (SCREENSHOTS / "measured.json").write_text(json.dumps(measured, indent=1))
    assert problems == [], "\n".join(problems)

    # The recommended point sits on the frontier line it is ringed on (within a pixel), Kimi-K3's too.
    for end in ("kimi-k3", "largest"):
        [chart] = measured[f"tradeoff-{end}"]
        assert chart["ring"] and chart["lines"], end
        nearest = min(_to_segment(chart["ring"], a, b) for line in chart["lines"]
                      for a, b in zip(line, line[1:], strict=False))
        assert nearest <= 1.0, f"tradeoff ({end}): the recommended point is {nearest:.1f} units off every line"
    # An upgrade's ninety decisions: a counted band, the holds' and the rollback's lines, not a barcode.
    weights, errors, latency = measured["upgrade-largest"]
    for chart in (weights, errors, latency):
        assert chart["markLines"] <= MAX_MARK_LINES, chart["markLines"]
        assert chart["bands"] and sum(chart["bands"]) + chart["markLines"] == 90 + 3 + 1, chart["bands"]
    assert any(t["words"].endswith(" decisions") for t in weights["texts"]), "the band says how many it holds"
    assert len(weights["lines"]) == 6, "each cluster's new and old share, drawn over the bands"

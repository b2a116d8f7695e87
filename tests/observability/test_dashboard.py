"""The Grafana dashboard (deploy/grafana/dashboards/wingsmith.json) parses, lays out on Grafana's
24-column grid, covers the journey, workloads, gateway and worker health, and asks only for metric
families the plane's processes really export."""

from __future__ import annotations

import json
import re
from pathlib import Path

from api.metrics import API_REGISTRY
from gateway.metrics import GatewayMetrics
from gateway.table import RouteTable
from tests.observability.test_worker_metrics import SDK_FAMILIES
from wingsmith.adapters.metrics import WORKER_REGISTRY

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards" / "wingsmith.json"
# Failure families the SDK creates at the first failure (so a healthy test worker has none yet).
SDK_FAILURE_FAMILIES = {"temporal_workflow_failed"}
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")
_PROMQL_WORDS = {"sum", "by", "rate", "increase", "histogram_quantile", "le"}


def _exported() -> set[str]:
    gateway = GatewayMetrics(RouteTable(None)).registry
    names = {m.name for registry in (WORKER_REGISTRY, API_REGISTRY, gateway) for m in registry.collect()}
    return names | SDK_FAMILIES | SDK_FAILURE_FAMILIES | {"wingsmith_worker_sdk_metrics_up", "up"}


def _family(series: str) -> str:
    for suffix in _SUFFIXES:
        if series.endswith(suffix):
            return series.removesuffix(suffix)
    return series


def test_dashboard_parses_and_lays_out():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
    rows = " ".join(p["title"].lower() for p in panels if p["type"] == "row")
    for topic in ("journey", "workloads", "gateway", "worker health"):
        assert topic in rows, rows


def test_every_query_reads_an_exported_family():
    exported = _exported()
    exprs = [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", [])]
    assert len(exprs) > 20
    for expr in exprs:
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), expr
        bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\"[^\"]*\"", "", expr)  # drop matchers, ranges, strings
        names = {w for w in re.findall(r"[a-z_][a-z0-9_]*", bare)
                 if w not in _PROMQL_WORDS and ("_" in w or w == "up") and not w.startswith("__")}
        metrics = {n for n in names if n.startswith(("wingsmith_", "temporal_", "http_")) or n == "up"}
        assert metrics, expr
        unknown = {m for m in metrics if _family(m) not in exported}
        assert not unknown, (expr, unknown)

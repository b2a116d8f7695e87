"""Team quotas on the fleet page: each team's use against its quota (GPUs per card, `*` for every card, and the
budget per hour), drawn as bars with the quota marked across them, and the figures in a table. An admin sees
every team with a quota or a live workload, anyone else their own team (api/services/quotas.py)."""

from __future__ import annotations

from markupsafe import Markup

from api.responses import TeamQuota
from console.charts import BarRow, Segment, stacked_bars


def quota_chart(teams: list[TeamQuota]) -> Markup:
    """A bar per team and GPU limit: what is used, with the quota marked (the budget is in the table)."""
    return stacked_bars("GPUs used against each team's quota", [
        BarRow(label=f"{t.team} · {'every card' if line.limit == '*' else line.limit}",
               segments=[Segment(label="used", value=line.used)], marks=[Segment(label="quota", value=line.quota)])
        for t in teams for line in t.lines if line.unit == "GPUs"], "GPUs")

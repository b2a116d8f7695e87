"""A progressive upgrade as a picture: the traffic weight of the old and the new version on each cluster
over time, the error rate and p99 latency the judge compared at each decision, the decisions and their
reasons, and the rollback marked. Drawn from what the upgrade records (workflows/workload/upgrade.py):
the registry's `workload_upgrade_*` events (each judgment with its figures, the end with its failures)
and, while the workflow still holds them, its own `UpgradeStep` events, which say when each weight moved.
Without those the weight is shown from the judgments, which come one dwell after each move."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from markupsafe import Markup
from pydantic import BaseModel, ConfigDict

from console.time_charts import TimeLine, TimeMark, time_lines
from contracts import conditions as reason

_ENDS = {"workload_upgrade_succeeded": "succeeded", "workload_upgrade_rolled_back": "rolled_back",
         "workload_upgrade_aborted": "aborted", "workload_upgrade_failed": "failed"}
MAX_SHOWN = 3  # the newest upgrades; older ones stay in the events


class Decision(BaseModel):
    at: datetime
    cluster: str
    percent: int
    verdict: str  # "healthy", "too little traffic yet", "rolled back"
    figures: dict[str, float | int | None]
    reasons: list[str]


class Moment(BaseModel):
    at: datetime
    words: str
    kind: int  # a TimeMark kind: 0 rollback (red), 1 decision (dark), 2 pause (amber)
    judgment: bool = False  # a judgment's moment (its row is in the decisions already)


class UpgradeTimeline(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    number: int
    source: str
    target: str
    state: str  # running, paused, succeeded, rolled_back, aborted, failed
    start: datetime
    end: datetime
    weights: dict[str, list[tuple[datetime, int]]]  # cluster → (when, percent on the new version)
    decisions: list[Decision]
    moments: list[Moment]
    failures: list[str]
    ended_at: datetime | None = None
    weight_chart: Markup = Markup("")
    error_chart: Markup = Markup("")  # the error rates the judge compared, new against old
    latency_chart: Markup = Markup("")  # the p99 latencies it compared

    @property
    def rolled_back(self) -> bool:
        return self.state in ("rolled_back", "aborted", "failed")


def _at(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _number(step: str) -> int | None:
    parts = (step or "").split(":")
    for i, part in enumerate(parts[:-1]):
        if part == "upgrade" and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return None


def _verdict(detail: dict[str, Any]) -> str:
    if not detail.get("healthy", True):
        return "rolled back"
    return "healthy" if detail.get("enough_traffic") else "too little traffic yet"


def upgrade_timelines(events: list[dict[str, Any]], timeline: list[dict[str, Any]] | None,
                      live: dict[str, Any] | None, now: datetime) -> list[UpgradeTimeline]:
    """The workload's upgrades, newest first (at most MAX_SHOWN), each with its charts drawn."""
    found: dict[int, UpgradeTimeline] = {}
    for e in events:
        kind, detail, at = e.get("kind") or "", e.get("detail") or {}, _at(e.get("at"))
        n = _number(e.get("step") or "")
        if n is None or at is None or not kind.startswith("workload_upgrade"):
            continue
        if kind == "workload_upgrade_started":
            found[n] = UpgradeTimeline(number=n, source=str(detail.get("from", "")), target=str(detail.get("to", "")),
                                       state="running", start=at, end=at,
                                       weights={c: [(at, 0)] for c in detail.get("clusters") or []},
                                       decisions=[], moments=[], failures=[])
            continue
        u = found.get(n)
        if u is None:
            continue
        u.end = max(u.end, at)
        if kind == "workload_upgrade_step":
            d = Decision(at=at, cluster=str(detail.get("cluster", "")), percent=int(detail.get("percent") or 0),
                         verdict=_verdict(detail), figures=detail.get("figures") or {},
                         reasons=[str(f) for f in detail.get("failures") or []])
            u.decisions.append(d)
            u.moments.append(Moment(at=at, kind=0 if d.verdict == "rolled back" else 1, judgment=True,
                                    words=f"{d.cluster} at {d.percent} %: {d.verdict}"))
        elif kind == "workload_upgrade_paused":
            u.moments.append(Moment(at=at, kind=2, words=f"held: {detail.get('reason', '')}"))
        elif kind in _ENDS:
            u.state, u.ended_at = _ENDS[kind], at
            u.failures = [str(f) for f in detail.get("failures") or []]
            words = "succeeded: all traffic on the new version" if u.state == "succeeded" else \
                f"{u.state.replace('_', ' ')}: " + "; ".join(u.failures)
            u.moments.append(Moment(at=at, kind=1 if u.state == "succeeded" else 0, words=words))
    _weights(found, timeline or [])
    if live and live.get("state") == "paused" and found:
        newest = found[max(found)]
        newest.state = "paused" if newest.state == "running" else newest.state
    for u in found.values():
        if u.state in ("running", "paused"):
            u.end = max(u.end, now)
        _draw(u)
    return sorted(found.values(), key=lambda u: u.number, reverse=True)[:MAX_SHOWN]


def _weights(found: dict[int, UpgradeTimeline], timeline: list[dict[str, Any]]) -> None:
    """Each cluster's weight moves: the workflow's own step events when it still holds them (the moment
    the weight moved), else the judgments (a dwell later); the end puts it at 100 % or back to 0 %."""
    moved: dict[int, list[tuple[datetime, str, int]]] = {}
    for e in timeline:
        detail, at = e.get("detail") or {}, _at(e.get("time"))
        if e.get("reason") == reason.UPGRADE_STEP and at is not None and isinstance(detail.get("upgrade"), int):
            moved.setdefault(detail["upgrade"], []).append((at, str(detail.get("cluster")), int(detail["percent"])))
    for n, u in found.items():
        steps = moved.get(n) or [(d.at, d.cluster, d.percent) for d in u.decisions]
        for at, cluster, percent in sorted(steps):
            u.weights.setdefault(cluster, [(u.start, 0)]).append((at, percent))
        if u.ended_at is not None:
            final = 100 if u.state == "succeeded" else 0
            for moves in u.weights.values():
                moves.append((u.ended_at, final))


def _stepped(moves: list[tuple[datetime, int]], end: datetime) -> list[tuple[datetime, float | None]]:
    """A weight holds until it moves: each move drawn as a vertical step."""
    out: list[tuple[datetime, float | None]] = []
    for at, percent in sorted(moves):
        if out:
            out.append((at, out[-1][1]))
        out.append((at, float(percent)))
    if out:
        out.append((max(end, out[-1][0]), out[-1][1]))
    return out


def _draw(u: UpgradeTimeline) -> None:
    start, end = u.start - timedelta(seconds=5), max(u.end, u.start + timedelta(seconds=60))
    lines = []
    for i, (cluster, moves) in enumerate(sorted(u.weights.items())):
        new = _stepped(moves, end)
        lines.append(TimeLine(label=f"{cluster}: new version", colour=i * 2 % 6, points=new))
        lines.append(TimeLine(label=f"{cluster}: old version", colour=i * 2 % 6, dashed=True,
                              points=[(at, None if v is None else 100 - v) for at, v in new]))
    marks = [TimeMark(label=m.words, at=m.at, kind=m.kind) for m in u.moments]
    ended = "rolled back" if u.rolled_back else u.state.replace("_", " ")
    u.weight_chart = time_lines(
        f"Upgrade {u.number}: traffic weight of the old and new version", lines, start, end, "% of traffic",
        top=100, marks=marks, height=140,
        description=f"From {u.source} to {u.target}; {len(u.decisions)} decision(s); {ended}. "
                    + " ".join(f"{m.at:%H:%M:%S} {m.words}." for m in u.moments))
    judged = sorted(u.decisions, key=lambda d: d.at)

    def figure(name: str, scale: float) -> list[tuple[datetime, float | None]]:
        return [(d.at, None if d.figures.get(name) is None else float(d.figures[name]) * scale)  # type: ignore[arg-type]
                for d in judged]
    said = " ".join(f"{d.at:%H:%M:%S} {d.cluster} at {d.percent} %: new error rate {d.figures.get('new_error_rate')}, "
                    f"old {d.figures.get('old_error_rate')}, new p99 {d.figures.get('new_p99_seconds')} s, old "
                    f"{d.figures.get('old_p99_seconds')} s; {d.verdict}." for d in judged)
    def compared(what: str, figure_name: str, scale: float, colour: int, unit: str) -> Markup:
        """The new and the old version's figure at each decision, as the judge compared them."""
        if not judged:
            return Markup("")
        return time_lines(
            f"Upgrade {u.number}: {what} the judge compared", [
                TimeLine(label="new version", colour=colour, points=figure(f"new_{figure_name}", scale)),
                TimeLine(label="old version", colour=colour, dashed=True, points=figure(f"old_{figure_name}", scale))],
            start, end, unit, marks=marks, height=100, description="At each decision: " + said)
    u.error_chart = compared("error rate", "error_rate", 100, 5, "% of requests failed")
    u.latency_chart = compared("p99 latency", "p99_seconds", 1000, 0, "ms")

"""The autoscaling part of a workload page (issue 53): the policy in words (or that there is none), the
autoscaler's last scales in a short table with what came of each, the decision waiting for an approval with
its Approve and Reject buttons for approvers, and each scale drawn over the traffic charts (an arrowhead up for
a scale-out, down for a scale-in; holds are not drawn). Reads and the approval go through
api/services/autoscaling.py, as `GET /v1/workloads/{id}/autoscaling` and its approve route do."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from api.responses import AutoscaleDecisionRow, Autoscaling
from console.time_charts import Level, TimeMark
from wingsmith.domain.autoscaling import AutoscalingPolicy
from wingsmith.domain.text import CommentText

TABLE_ROWS = 10  # the page's table: the last scales; the API lists every decision, holds included

# What came of a decision (contracts.autoscaler.Outcome), in words.
OUTCOME_WORDS = {
    "held": "held",
    "scaled": "scaled",
    "waiting_approval": "waiting for an approval: past the team's budget",
    "held_quota": "held: past the team's GPU quota",
    "held_budget": "held: past the team's budget",
    "refused": "refused by the workload (an upgrade runs or a delete is pending)",
    "rejected": "rejected by an approver",
    "expired": "no approval in time",
}
# A mark's colour (console/time_charts.py kinds): a scale done is dark, one waiting for a person amber, one
# that did not happen red.
_DONE, _WAITING, _NOT_DONE = 1, 2, 0


class DecisionLine(BaseModel):
    at: datetime
    tick: int | None
    action: str
    replicas_from: int
    replicas_to: int
    outcome: str
    outcome_words: str
    words: str  # the decision in a sentence, with its reasons
    note: str  # what came of it: the quota's numbers, who approved
    waiting: bool = False  # the decision that waits for an approval now

    @property
    def head(self) -> str:
        verb = {"scale_out": "scale out", "scale_in": "scale in"}.get(self.action, "hold at")
        return f"{verb} {self.replicas_from} → {self.replicas_to}" if self.action != "hold" \
            else f"hold at {self.replicas_from}"


class AutoscaleView(BaseModel):
    policy: AutoscalingPolicy | None
    policy_words: list[str]
    set_by: str | None
    workflow_url: str
    latest: DecisionLine | None  # the newest decision, a hold included
    lines: list[DecisionLine]  # the last scales, newest first
    waiting: DecisionLine | None

    @property
    def shown(self) -> bool:
        return self.policy is not None or bool(self.lines) or self.latest is not None


class ApprovalForm(BaseModel):
    """The console's approval form, bounded as the API's body (api/routes/workloads.py ApprovalBody)."""
    tick: int = Field(ge=1, le=2**31 - 1)
    decision: Literal["approve", "reject"]
    comment: CommentText = ""


def tick_of(step: str) -> int | None:
    """The autoscaler records a decision under its loop and tick (`<loop>:12`, workflows/autoscaler.py), one waiting
    for an approval also as `<loop>:12:waiting`; the loop is a run id, never all digits."""
    return next((int(part) for part in step.split(":") if part.isdigit()), None)


def policy_words(policy: AutoscalingPolicy) -> list[str]:
    targets = [f"time to first token p95 ≤ {policy.ttft_p95_ms:g} ms" if policy.ttft_p95_ms else "",
               f"time per output token p95 ≤ {policy.tpot_p95_ms:g} ms" if policy.tpot_p95_ms else "",
               f"{policy.requests_per_second_per_replica:g} requests per second per replica"
               if policy.requests_per_second_per_replica else ""]
    return [f"between {policy.min_replicas} and {policy.max_replicas} replicas",
            "targets: " + ", ".join(t for t in targets if t),
            f"a target missed for {policy.scale_up_window_s} s adds replicas; room for one fewer for "
            f"{policy.scale_down_window_s} s removes one; nothing moves for {policy.cooldown_s} s after a change",
            "past the team's budget a scale-out waits for an approval" if policy.approval_past_budget
            else "past the team's budget a scale-out is held"]


def _line(row: AutoscaleDecisionRow, waiting_tick: int | None) -> DecisionLine:
    tick = tick_of(row.step)
    waits = row.outcome == "waiting_approval" and tick is not None and tick == waiting_tick
    words = OUTCOME_WORDS.get(row.outcome, row.outcome.replace("_", " "))
    if row.outcome == "waiting_approval" and not waits:
        words = "waited for an approval"
    return DecisionLine(at=row.at, tick=tick, action=row.action, replicas_from=row.replicas_from,
                        replicas_to=row.replicas_to, outcome=row.outcome, outcome_words=words, words=row.words,
                        note=row.note, waiting=waits)


def _final(rows: list[AutoscaleDecisionRow], waiting_tick: int | None) -> list[DecisionLine]:
    """One line per tick, newest first: a decision that waited for an approval is recorded twice (waiting, then
    what came of it); the second says more."""
    lines: list[DecisionLine] = []
    seen: dict[tuple[int, datetime], int] = {}  # both records carry the decision's own time; a later loop's ticks
    for row in rows:                             # count from 1 again
        line = _line(row, waiting_tick)
        if line.tick is None:
            lines.append(line)
            continue
        key = (line.tick, line.at)
        if key in seen:
            if lines[seen[key]].outcome == "waiting_approval":
                lines[seen[key]] = line
            continue
        seen[key] = len(lines)
        lines.append(line)
    return lines


def autoscale_view(shown: Autoscaling, changes: list[AutoscaleDecisionRow]) -> AutoscaleView:
    """`shown`: the service's answer (the policy, the waiting decision, the newest decisions); `changes`: the
    scales of the charts' window, newest first."""
    waiting_tick = _waiting_tick(shown.waiting)
    lines = _final(changes, waiting_tick)
    latest = _final(shown.decisions[:2], waiting_tick)
    return AutoscaleView(policy=shown.policy, policy_words=policy_words(shown.policy) if shown.policy else [],
                         set_by=shown.set_by, workflow_url=shown.workflow_url, latest=latest[0] if latest else None,
                         lines=lines[:TABLE_ROWS], waiting=next((ln for ln in lines if ln.waiting), None)
                         or next((ln for ln in latest if ln.waiting), None))


def _waiting_tick(waiting: dict[str, Any] | None) -> int | None:
    tick = (waiting or {}).get("tick")
    return tick if isinstance(tick, int) else None


def decision_marks(view: AutoscaleView, changes: list[AutoscaleDecisionRow]) -> list[TimeMark]:
    """Every scale of the window as a mark over the traffic charts (the table shows only the last few)."""
    marks = []
    for line in _final(changes, view.waiting.tick if view.waiting else None):
        kind = _DONE if line.outcome == "scaled" else _WAITING if line.waiting else _NOT_DONE
        marks.append(TimeMark(label=f"autoscaler: {line.head}, {line.outcome_words}", at=line.at, kind=kind,
                              head="up" if line.action == "scale_out" else "down"))
    return marks


def target_levels(policy: AutoscalingPolicy | None) -> list[Level]:
    if policy is None or policy.ttft_p95_ms is None:
        return []
    return [Level(label="autoscaling target: time to first token p95", value=policy.ttft_p95_ms)]

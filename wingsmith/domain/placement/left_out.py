"""The clusters a compact decision does not explain one by one, summed up for a person.

A decision over a large fleet carries full verdicts only for some clusters; the others come as
`ruled_out` groups and a `passed_over` list (see `place`). Both can hold thousands of names and, when
inventories fail in many ways, many groups: the console's check and the CLI's dry run show the largest
groups with a few names each and say how much they leave out, so what they print stays small whatever
the fleet's size. The API's dry run (`POST /v1/placements/dry-run`) keeps every name.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from wingsmith.domain.placement.models import RuledOut

SHOWN_NAMES = 5
SHOWN_GROUPS = 8


class LeftOutGroup(BaseModel, frozen=True):
    filter: str | None = Field(description="the first filter they fail; None for the clusters passed over")
    reason: str
    count: int
    names: list[str] = Field(description=f"the first {SHOWN_NAMES} by name")

    @property
    def more(self) -> int:
        return self.count - len(self.names)

    def text(self) -> str:
        names = ", ".join(self.names) + (f" and {self.more} more" if self.more else "")
        where = f"ruled out by {self.filter}" if self.filter else "passed over"
        return f"{self.count} cluster(s) {where}: {self.reason} ({names})"


class LeftOut(BaseModel, frozen=True):
    ruled_out: list[LeftOutGroup] = Field(description=f"the {SHOWN_GROUPS} largest groups, largest first")
    hidden_groups: int = Field(description="ruled-out groups not shown")
    hidden_clusters: int = Field(description="clusters in the groups not shown")
    passed_over: LeftOutGroup | None

    @property
    def clusters(self) -> int:
        return (sum(g.count for g in self.ruled_out) + self.hidden_clusters
                + (self.passed_over.count if self.passed_over else 0))

    def lines(self) -> list[str]:
        lines = [g.text() for g in self.ruled_out]
        if self.hidden_groups:
            lines.append(f"{self.hidden_clusters} more cluster(s) ruled out for {self.hidden_groups} other reason(s)")
        if self.passed_over:
            lines.append(self.passed_over.text())
        return lines


PASSED_OVER_REASON = "they pass every filter, but every replica went to a cluster that scored higher"


def left_out(ruled_out: Sequence[RuledOut], passed: Sequence[str]) -> LeftOut | None:
    """A decision's clusters without a verdict of their own (its `ruled_out` and `passed_over`), bounded;
    None when every cluster has one."""
    if not ruled_out and not passed:
        return None
    # Largest first (stable: equal sizes keep the decision's order, by filter and reason).
    groups = sorted(ruled_out, key=lambda g: -len(g.clusters))
    shown, hidden = groups[:SHOWN_GROUPS], groups[SHOWN_GROUPS:]
    return LeftOut(
        ruled_out=[LeftOutGroup(filter=g.filter, reason=g.reason, count=len(g.clusters),
                                names=g.clusters[:SHOWN_NAMES]) for g in shown],
        hidden_groups=len(hidden), hidden_clusters=sum(len(g.clusters) for g in hidden),
        passed_over=LeftOutGroup(filter=None, reason=PASSED_OVER_REASON, count=len(passed),
                                 names=list(passed[:SHOWN_NAMES])) if passed else None)

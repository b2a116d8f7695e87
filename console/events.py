"""A workload's events as a person reads them: grouped by the operation they belong to (the rollout, a
scale, each upgrade, the watch's heals, the delete), the newest operation and the newest step first, one
line per step. The registry names each step (`step`, `kind`); the workflow's own notes are free text,
so they are placed by the words they start with."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

ROLLOUT = "Create and roll out"
WATCH = "Watch and heal"
_UPGRADE_STEP = re.compile(r"(?:^|:)upgrade:(\d+):")


class EventLine(BaseModel):
    at: datetime | None
    when: str
    what: str
    who: str | None
    source: str
    operation: str


class EventGroup(BaseModel):
    operation: str
    lines: list[EventLine]  # newest first

    @property
    def latest(self) -> str:
        return self.lines[0].when if self.lines else ""


def operation_of(kind: str, step: str, detail: dict[str, Any]) -> str:
    """The operation a registry event belongs to, from its step key and kind."""
    upgrade = _UPGRADE_STEP.search(step or "")
    if upgrade:
        return f"Upgrade {upgrade.group(1)}"
    if kind.startswith("workload_upgrade") or kind.startswith("upgrade"):
        return "Upgrade"
    if kind == "workload_healed" or (step or "").startswith("heal:") or ":watch:" in (step or ""):
        return WATCH
    if (step or "").startswith("follow:") or kind.startswith("follow"):
        return "Follow upstream"
    if "scal" in kind:
        return "Scale"
    if kind.endswith(("deleting", "deleted")):
        return "Delete"
    return ROLLOUT


def operation_of_note(text: str) -> str:
    first = text.split(" ", 1)[0].lower()
    if first.startswith("upgrade"):
        return "Upgrade"
    if first.startswith(("heal", "watch", "drift")):
        return WATCH
    if first.startswith("scal"):
        return "Scale"
    if first.startswith("delet"):
        return "Delete"
    return ROLLOUT


def _key(line: EventLine) -> datetime:
    at = line.at or datetime.min.replace(tzinfo=UTC)
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).replace(microsecond=0)


def event_groups(lines: list[EventLine]) -> list[EventGroup]:
    """Groups newest first by their latest step; inside each, newest first, a repeated line (the same
    words in the same second) shown once."""
    groups: dict[str, list[EventLine]] = {}
    seen: set[tuple[str, str, str]] = set()
    for line in sorted(lines, key=_key, reverse=True):
        mark = (line.operation, line.when, line.what)
        if mark in seen:
            continue
        seen.add(mark)
        groups.setdefault(line.operation, []).append(line)
    return sorted((EventGroup(operation=op, lines=ls) for op, ls in groups.items()),
                  key=lambda g: _key(g.lines[0]), reverse=True)

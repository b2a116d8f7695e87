"""Teams: workloads, endpoints and watches belong to the team that created them; artifacts, their
approvals and clusters belong to the organisation. A principal acts on its own team's objects, an
admin on every team's; to anyone else another team's object does not exist."""

from __future__ import annotations

# The team of every identity that names none, and of every row made before teams existed, so a
# single-team plane keeps working unchanged.
DEFAULT_TEAM = "default"
# What a team may be called: a DNS-1123 label (a-z, 0-9, '-', at most 63), as in a token or a path.
TEAM_NAME = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


def visible(owner: str | None, team: str, *, sees_all: bool) -> bool:
    """Whether a principal of `team` (an admin when `sees_all`) may see and act on an object of `owner`.
    An object whose team is unknown (None: written before its team was) is the default team's."""
    return sees_all or (owner or DEFAULT_TEAM) == team

"""The quota test bed is the teams bed (tests/teams/conftest.py): three simulated clusters (two of H200, one of
GB200 NVL4) registered in the plane, Kimi-K3 approved, and a token table of two operator teams (the default
team: olga; red: rita, with vera its viewer), an approver and an admin of a third team (root). The default team
has no quota: it is not limited, as every team was before quotas."""

from __future__ import annotations

from tests.teams.conftest import (  # noqa: F401 - pytest fixtures
    TEAM_TOKENS,
    api,
    approved_kimi,
    as_,
    clusters,
    deps,
    gateway,
    hub,
    settings,
    sims,
)

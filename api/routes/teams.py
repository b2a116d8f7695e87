"""Team quotas (the use cases: api/services/quotas.py; the rules: wingsmith/domain/quotas.py).

- `PUT /v1/teams/{team}/quota` (admin): set or replace a team's quota: GPUs per card (or `*` for every card),
  optionally a budget per hour, and the policy past it (`refuse`).
- `GET /v1/teams/{team}/quota` (viewer of that team, or an admin): the quota and what the team's workloads hold
  against it, per card and in cost per hour; another team's answers 404.
- `DELETE /v1/teams/{team}/quota` (admin): remove it; the team is not limited from then on (no quota: unlimited).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from api.auth import Admin, Viewer
from api.deps import DbDep
from api.responses import TeamQuota
from api.services import quotas as service
from wingsmith.domain.quotas import Quota
from wingsmith.domain.teams import TEAM_NAME

router = APIRouter(prefix="/v1/teams", tags=["teams"])
Team = Annotated[str, Path(pattern=TEAM_NAME, max_length=63, description="the team: a DNS-1123 label")]


@router.put("/{team}/quota", response_model=TeamQuota, summary="Set a team's quota (admin)")
async def set_quota(team: Team, body: Quota, admin: Admin, db: DbDep) -> TeamQuota:
    return await service.set_quota(team, body, principal=admin, db=db)


@router.get("/{team}/quota", response_model=TeamQuota,
            summary="A team's quota and its use against it (the team itself, or an admin)")
async def show_quota(team: Team, viewer: Viewer, db: DbDep) -> TeamQuota:
    return await service.show(team, principal=viewer, db=db)


@router.delete("/{team}/quota", status_code=204, response_class=Response, response_model=None,
               summary="Remove a team's quota: the team is not limited from then on (admin)")
async def remove_quota(team: Team, admin: Admin, db: DbDep) -> Response:
    await service.remove(team, principal=admin, db=db)
    return Response(status_code=204)

"""A workload's follow policy: `PATCH /v1/workloads/{id}/follow` with `{"follow": "auto"|"manual"}`.
`auto`: approving a newer draft of the workload's branch (a new commit, or new recipe evidence)
starts its progressive upgrade; `manual`: the approval only records that a newer version exists
(the use case: api/services/workloads.py)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.auth import Operator
from api.deps import DbDep
from api.responses import FollowPolicy
from api.services.workloads import set_follow as set_policy
from wingsmith.domain.workloads import Follow

router = APIRouter(prefix="/v1/workloads", tags=["workloads"])


class FollowChange(BaseModel):
    follow: Follow = Field(description="auto: upgrade by itself when a newer draft is approved; manual: only tell")


@router.patch("/{workload_id}/follow", response_model=FollowPolicy, summary="Set a workload's follow policy")
async def set_follow(workload_id: str, body: FollowChange, principal: Operator, db: DbDep) -> FollowPolicy:
    return await set_policy(workload_id, body.follow, principal=principal, db=db)

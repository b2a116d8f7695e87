"""A workload's follow policy: `PATCH /v1/workloads/{id}/follow` with `{"follow": "auto"|"manual"}`.
`auto`: approving a newer draft of the workload's branch (a new commit, or new recipe evidence)
starts its progressive upgrade; `manual`: the approval only records that a newer version exists."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.auth import Operator
from api.deps import DbDep
from api.errors import ApiError
from api.ownership import hide
from wingsmith.store import follow as store
from wingsmith.store import workloads as workloads_store
from wingsmith.workloads import Follow

router = APIRouter(prefix="/v1/workloads", tags=["workloads"])


class FollowChange(BaseModel):
    follow: Follow = Field(description="auto: upgrade by itself when a newer draft is approved; manual: only tell")


class FollowPolicy(BaseModel):
    workload_id: str
    follow: Follow
    set_by: str


@router.patch("/{workload_id}/follow", response_model=FollowPolicy, summary="Set a workload's follow policy")
async def set_follow(workload_id: str, body: FollowChange, principal: Operator, db: DbDep) -> FollowPolicy:
    row = await workloads_store.get_workload(db, workload_id)
    not_found = ApiError(404, f"workload {workload_id} not found")
    if row is None:
        raise not_found
    hide(principal, "workload", workload_id, row["team"], not_found)
    if row["state"] in store.NOT_FOLLOWING_STATES:
        raise ApiError(409, f"workload {workload_id} is {row['state']}: it follows nothing any more",
                       code="workload_not_live")
    await store.set_follow(db, workload_id=workload_id, follow=body.follow, actor=principal.name,
                           team=principal.team, step=f"follow-set:{uuid.uuid4().hex}")
    return FollowPolicy(workload_id=workload_id, follow=body.follow, set_by=principal.name)

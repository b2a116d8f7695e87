"""The watch on upstream: each approved repository's branch is checked by a Temporal Schedule
(`watch/<org>/<name>@<branch>`). List them, pause or resume one, or run one now.

A watch belongs to the team that registered the first approved artifact of its branch (its schedule's
memo says which); like workloads and endpoints, another team's watch is not listed and answers 404."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from temporalio.client import ScheduleHandle
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Operator, Viewer
from api.deps import SettingsDep, TemporalDep
from api.errors import ApiError
from api.ownership import hide, may_see
from api.responses import WatchAction, WatchList
from contracts.watch import WATCH_PREFIX, watch_team
from wingsmith.temporal import workflow_ui_url

router = APIRouter(prefix="/v1/watches", tags=["watches"])


@router.get("", response_model=WatchList,
            summary="The watches on upstream: one schedule per approved repository and branch")
async def list_watches(viewer: Viewer, temporal: TemporalDep, settings: SettingsDep) -> WatchList:
    watches = []
    try:
        async for s in await temporal.list_schedules():
            if not s.id.startswith(WATCH_PREFIX):
                continue
            team = watch_team(await s.memo())
            if not may_see(viewer, team):
                continue
            repo, _, branch = s.id[len(WATCH_PREFIX):].rpartition("@")
            state = s.schedule.state if s.schedule else None
            watches.append({
                "id": s.id, "repo_id": repo, "branch": branch, "team": team, "paused": bool(state and state.paused),
                "note": state.note if state else None,
                "next_runs": [t.isoformat() for t in (s.info.next_action_times if s.info else [])[:1]],
                "recent_runs": [{"at": a.started_at.isoformat(), "workflow_id": a.action.workflow_id,
                                 "workflow_url": workflow_ui_url(settings, a.action.workflow_id)}
                                for a in (s.info.recent_actions if s.info else [])[-3:]
                                if hasattr(a.action, "workflow_id")]})
    except RPCError as err:
        raise ApiError(503, f"Temporal could not list the schedules: {err.message}") from None
    return WatchList.model_validate({"watches": sorted(watches, key=lambda w: w["id"])})


@router.post("/{org}/{name_at_branch}/{action}", response_model=WatchAction,
             summary="Pause, resume or run now one watch")
async def act(org: str, name_at_branch: str, action: Literal["pause", "resume", "trigger"], principal: Operator,
              temporal: TemporalDep) -> WatchAction:
    schedule_id = f"{WATCH_PREFIX}{org}/{name_at_branch}"
    handle: ScheduleHandle = temporal.get_schedule_handle(schedule_id)
    not_found = ApiError(404, f"no watch {schedule_id} (it exists once an artifact of that branch is approved)")
    try:
        hide(principal, "watch", schedule_id, watch_team(await (await handle.describe()).memo()), not_found)
        if action == "pause":
            await handle.pause(note=f"paused by {principal.name}")
        elif action == "resume":
            await handle.unpause(note=f"resumed by {principal.name}")
        else:
            await handle.trigger()
        desc = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise not_found from None
        raise ApiError(503, f"Temporal could not take the request: {err.message}") from None
    return WatchAction(id=schedule_id, action=action, paused=desc.schedule.state.paused,
                       note=desc.schedule.state.note)

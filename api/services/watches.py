"""The watch on upstream: each approved repository's branch is checked by a Temporal Schedule
(`watch/<org>/<name>@<branch>`). List them, pause or resume one, or run one now.

A watch belongs to the team that registered the first approved artifact of its branch (its schedule's
memo says which); like workloads and endpoints, another team's watch is not listed and answers 404."""

from __future__ import annotations

from typing import Literal

from temporalio.client import Client, ScheduleHandle, ScheduleListDescription
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Principal
from api.errors import ApiError
from api.ownership import hide, may_see
from api.responses import Watch, WatchAction, WatchRun
from contracts.watch import WATCH_PREFIX, watch_team
from wingsmith.adapters.temporal import workflow_ui_url
from wingsmith.domain.config import Settings

Action = Literal["pause", "resume", "trigger"]


async def list_watches(viewer: Principal, *, temporal: Client, settings: Settings) -> list[Watch]:
    """The watches `viewer` may see, by id."""
    watches = []
    try:
        async for s in await temporal.list_schedules():
            if not s.id.startswith(WATCH_PREFIX):
                continue
            team = watch_team(await s.memo())
            if may_see(viewer, team):
                watches.append(_watch(s, team, settings))
    except RPCError as err:
        raise ApiError(503, f"Temporal could not list the schedules: {err.message}") from None
    return sorted(watches, key=lambda w: w.id)


def _watch(s: ScheduleListDescription, team: str, settings: Settings) -> Watch:
    repo, _, branch = s.id[len(WATCH_PREFIX):].rpartition("@")
    state = s.schedule.state if s.schedule else None
    return Watch(id=s.id, repo_id=repo, branch=branch, team=team, paused=bool(state and state.paused),
                 note=state.note if state else None,
                 next_runs=(s.info.next_action_times if s.info else [])[:1],
                 recent_runs=[WatchRun(at=a.started_at, workflow_id=a.action.workflow_id,
                                       workflow_url=workflow_ui_url(settings, a.action.workflow_id))
                              for a in (s.info.recent_actions if s.info else [])[-3:]
                              if hasattr(a.action, "workflow_id")])


async def act(schedule_id: str, action: Action, *, principal: Principal, temporal: Client) -> WatchAction:
    """Pause, resume or run now the watch `schedule_id`, in the name of `principal`."""
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

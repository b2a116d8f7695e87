"""The watch on upstream (the use cases: api/services/watches.py): one Temporal Schedule per approved
repository and branch, `watch/<org>/<name>@<branch>`. List them, pause or resume one, or run one now; another
team's watch is not listed and answers 404."""

from __future__ import annotations

from fastapi import APIRouter

from api.auth import Operator, Viewer
from api.deps import SettingsDep, TemporalDep
from api.responses import WatchAction, WatchList
from api.services import watches as service
from contracts.watch import WATCH_PREFIX

router = APIRouter(prefix="/v1/watches", tags=["watches"])


@router.get("", response_model=WatchList,
            summary="The watches on upstream: one schedule per approved repository and branch")
async def list_watches(viewer: Viewer, temporal: TemporalDep, settings: SettingsDep) -> WatchList:
    return WatchList(watches=await service.list_watches(viewer, temporal=temporal, settings=settings))


@router.post("/{org}/{name_at_branch}/{action}", response_model=WatchAction,
             summary="Pause, resume or run now one watch")
async def act(org: str, name_at_branch: str, action: service.Action, principal: Operator,
              temporal: TemporalDep) -> WatchAction:
    return await service.act(f"{WATCH_PREFIX}{org}/{name_at_branch}", action, principal=principal, temporal=temporal)

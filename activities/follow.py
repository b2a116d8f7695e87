"""The follow policy at work: when a newer draft of a repository's branch is approved, each live
workload on an older artifact of that branch either gets the `upgrade` update (`follow: auto`) or an
event saying a newer approved version exists (`follow: manual`).

Idempotent: every update carries the id `follow:<new artifact id>`, which the workload's workflow
accepts once; events are keyed by (artifact workflow id, `follow:<workload>`). An update the workload
refuses (its validator says no: busy, not serving, ...) is recorded and not sent again by this
approval; only a Temporal that does not answer is retried, a bounded number of times."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from activities.artifact import ArtifactActivities
from contracts.artifact import ACTIVITY_UPGRADE_FOLLOWERS, FollowApproval, FollowOutcome
from contracts.ids import workload_workflow_id
from contracts.upgrade import UPDATE_UPGRADE, UpgradeRequest
from wingsmith.adapters.store import follow as store

log = logging.getLogger("wingsmith.follow")

# The workload workflow's update (`upgrade`, taking UpgradeRequest) is sent by its name from contracts:
# activities never import workflows.
UPGRADE_UPDATE = UPDATE_UPGRADE
_ACCEPTED_GRACE_SECONDS = 1.0


def follow_update_id(artifact_id: str) -> str:
    return f"follow:{artifact_id}"


class FollowActivities:
    def __init__(self, artifacts: ArtifactActivities):
        self.artifacts = artifacts  # its registry pool

    def _pool(self) -> asyncpg.Pool:
        return self.artifacts._pool()

    @activity.defn(name=ACTIVITY_UPGRADE_FOLLOWERS)
    async def upgrade_followers(self, params: FollowApproval) -> FollowOutcome:
        pool = self._pool()
        outcome = FollowOutcome()
        for row in await store.followers(pool, params.artifact_id):
            workload = row["id"]
            detail: dict[str, Any] = {"from": row["artifact_id"], "to": params.artifact_id,
                                      "approved_by": params.approver, "follow": row["follow"]}
            if row["follow"] != "auto":
                log.info("newer approved version: workload %s (follow: manual) runs %s; %s was approved by %s",
                         workload, row["artifact_id"], params.artifact_id, params.approver)
                await self._event(params, workload, "newer_version_approved", detail)
                outcome.told.append(workload)
                continue
            refused = await self._send_upgrade(params, workload)
            if refused is None:
                log.info("follow: auto: upgrade of %s to %s started", workload, params.artifact_id)
                await self._event(params, workload, "follow_upgrade_started", detail)
                outcome.upgrading.append(workload)
            else:
                log.warning("follow: auto: workload %s refused the upgrade to %s: %s", workload,
                            params.artifact_id, refused)
                await self._event(params, workload, "follow_upgrade_refused", {**detail, "reason": refused})
                outcome.refused[workload] = refused
        return outcome

    async def _send_upgrade(self, params: FollowApproval, workload: str) -> str | None:
        """None once the workload accepted the update; else its reason for refusing."""
        request = UpgradeRequest(artifact_id=params.artifact_id, requested_by=params.approver,
                                 reason=f"follow: auto after approval of {params.artifact_id}")
        handle = activity.client().get_workflow_handle(workload_workflow_id(workload))
        try:
            update = await handle.start_update(UPGRADE_UPDATE, request, id=follow_update_id(params.artifact_id),
                                               wait_for_stage=WorkflowUpdateStage.ACCEPTED)
            # A validator's refusal returns from start_update as an outcome already known, which
            # result() raises at once; an accepted upgrade runs on, and is not waited for.
            await asyncio.wait_for(update.result(), timeout=_ACCEPTED_GRACE_SECONDS)
        except TimeoutError:
            return None
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            return getattr(cause, "message", None) or str(cause or err)
        except RPCError as err:
            if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION,
                              RPCStatusCode.INVALID_ARGUMENT):
                return f"the workload's workflow cannot take it ({err.message})"
            raise  # Temporal unavailable or overloaded: retried with backoff
        return None

    async def _event(self, params: FollowApproval, workload: str, kind: str, detail: dict[str, Any]) -> None:
        await store.record_follow_event(self._pool(), source=params.workflow_id, step=f"follow:{workload}",
                                        workload_id=workload, kind=kind, actor=params.approver, detail=detail)

    def all(self) -> list[Callable[..., Any]]:
        return [self.upgrade_followers]

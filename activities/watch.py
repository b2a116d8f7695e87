"""Activities of the watch on upstream: where the branch points now, the schedule itself (created when
an artifact is approved), and the notice when a new draft opens (a log line, and the webhook whose URL
is read by reference at call time, so it never enters a history)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from temporalio import activity
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.exceptions import ApplicationError

from activities.artifact import ArtifactActivities, hub_failure
from contracts import watch as watch_contract
from contracts.artifact import artifact_id
from contracts.watch import EnsureWatchInput, UpstreamCheck, WatchInput, WatchNotice, watch_memo, watch_schedule_id
from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.recipes.files import catalog_in_force, load_catalog_version
from wingsmith.adapters.secrets import SecretUnavailable, read_secret_ref
from wingsmith.adapters.store import artifacts as store
from wingsmith.domain.hub.errors import HubError
from wingsmith.domain.recipes import Catalog
from wingsmith.domain.watch import evidence_moved

log = logging.getLogger("wingsmith.domain.watch")


class WatchActivities:
    def __init__(self, artifacts: ArtifactActivities):
        self.artifacts = artifacts  # its Hub resolver and registry pool
        self.settings = artifacts.settings
        self.catalogs = artifacts.settings.catalogs_dir

    @activity.defn(name=watch_contract.ACTIVITY_CHECK)
    async def check(self, params: WatchInput) -> UpstreamCheck:
        try:
            # The Hub client blocks: off the event loop, or it would stall the worker.
            proposal = await asyncio.to_thread(self.artifacts.resolver.resolve,
                                               f"hf:{params.repo_id}@{params.branch}", fresh=True)
        except HubError as exc:
            raise hub_failure(exc) from None
        pool = self.artifacts._pool()
        approved = await store.latest_approved(pool, params.repo_id)
        head = artifact_id(proposal.repo_id, proposal.sha)
        catalog = await asyncio.to_thread(catalog_in_force, self.catalogs)  # a first read parses a file
        check = UpstreamCheck(head_sha=proposal.sha, approved_id=approved["id"] if approved else None,
                              approved_sha=approved["sha"] if approved else None,
                              known=await self._exists(head), catalog_version=catalog.version)
        if approved is None:
            return check
        draft = approved.get("draft") or {}
        check.approved_catalog_version = draft.get("catalog_version")
        if check.approved_catalog_version != check.catalog_version:
            before = await asyncio.to_thread(self._catalog, check.approved_catalog_version)
            check.evidence_moved = evidence_moved(params.repo_id, approved, before, catalog)
            check.evidence_known = await self._exists(artifact_id(approved["repo_id"], approved["sha"],
                                                                  catalog.version))
        return check

    def _catalog(self, version: str | None) -> Catalog | None:
        try:
            return load_catalog_version(version, self.catalogs) if version else None
        except (LookupError, ValueError):
            return None  # no longer held: only the evidence itself is compared

    async def _exists(self, artifact: str) -> bool:
        """A draft or a decision exists for it (a failed one may be tried again)."""
        state = await store.artifact_state(self.artifacts._pool(), artifact)
        return state is not None and state != "failed"

    @activity.defn(name=watch_contract.ACTIVITY_ENSURE_SCHEDULE)
    async def ensure_schedule(self, params: EnsureWatchInput) -> str:
        """Create the repository's watch (idempotent: an existing one keeps its state and interval)."""
        schedule_id = watch_schedule_id(params.watch.repo_id, params.watch.branch)
        # The drafts it opens size on the fleet's live cards, as a registered draft does: this worker's kube queue.
        watch = params.watch.model_copy(update={"kube_task_queue": params.watch.kube_task_queue
                                                or self.settings.kube_task_queue})
        schedule = Schedule(
            action=ScheduleActionStartWorkflow(watch_contract.WORKFLOW, watch, id=f"{schedule_id}/run",
                                               task_queue=params.task_queue),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(
                every=timedelta(seconds=self.settings.watch_interval_seconds))]),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
            state=ScheduleState(note=f"watches {params.watch.repo_id}@{params.watch.branch} for new commits"))
        client = activity.client()
        try:
            await client.create_schedule(schedule_id, schedule, memo=watch_memo(params))
        except ScheduleAlreadyRunningError:
            # Approved again (a newer commit): the newest approval's task queue and review policy
            # apply; its state (paused or not) and its interval are the operator's and stay.
            def newest_action(current: ScheduleUpdateInput) -> ScheduleUpdate:
                return ScheduleUpdate(schedule=dataclasses.replace(current.description.schedule,
                                                                   action=schedule.action))
            await client.get_schedule_handle(schedule_id).update(newest_action)
        return schedule_id

    @activity.defn(name=watch_contract.ACTIVITY_NOTIFY)
    async def notify(self, notice: WatchNotice) -> None:
        if notice.reason == "recipe catalog":
            log.info("recipe evidence moved: %s@%s under catalog %s; new draft %s (approved: %s)", notice.repo_id,
                     notice.branch, notice.catalog_version, notice.new_artifact_id, notice.approved_id)
        else:
            log.info("upstream moved: %s@%s is now %s; new draft %s (approved: %s)", notice.repo_id, notice.branch,
                     notice.head_sha, notice.new_artifact_id, notice.approved_id)
        ref = self.settings.watch_webhook_ref
        if not ref:
            return
        try:
            url = read_secret_ref(ref, what="the watch webhook URL", setting="WINGSMITH_WATCH_WEBHOOK_REF").strip()
        except SecretUnavailable as exc:
            raise ApplicationError(f"the watch webhook reference cannot be read: {exc}", type="WebhookUnavailable",
                                   non_retryable=True) from None
        async with httpx.AsyncClient(timeout=10, verify=default_tls()) as http:
            try:
                event = "recipe_evidence_moved" if notice.reason == "recipe catalog" else "upstream_moved"
                r = await http.post(url, json={"event": event, **notice.model_dump()})
            except httpx.HTTPError as exc:
                raise ApplicationError(f"the watch webhook did not answer ({type(exc).__name__})",
                                       type="WebhookFailed") from None
        if r.status_code >= 400:
            raise ApplicationError(f"the watch webhook answered {r.status_code}", type="WebhookFailed",
                                   non_retryable=400 <= r.status_code < 500 and r.status_code != 429)

    def all(self) -> list[Callable[..., Any]]:
        return [self.check, self.ensure_schedule, self.notify]


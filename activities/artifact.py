"""Activities of the artifact workflow: resolve the pinned commit, gather the recipe evidence, size
the variants, and record the draft and the decision in the registry.

Each is idempotent: the resolver's (repo, sha) answer is immutable; rows are keyed by artifact id,
draft version and (workflow id, step). Failures that retrying cannot fix are non-retryable
`ApplicationError`s named after their cause, so the workflow fails at once with a clear type.
"""

from __future__ import annotations

import asyncpg
import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.registry import registry_pool
from contracts import artifact as contract
from contracts import draft_performance as perf_contract
from contracts.artifact import (
    ArtifactEventInput,
    ArtifactStateInput,
    EvidenceInput,
    EvidenceResult,
    RecordDecisionInput,
    ReminderInput,
    ResolveArtifactInput,
    SaveDraftInput,
    SaveDraftResult,
    SizeDraftInput,
)
from contracts.draft_performance import PerfPollingInput, SavePerformanceInput
from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.recipes.files import catalog_in_force, load_catalog_version
from wingsmith.adapters.secrets import SecretUnavailable, read_secret_ref
from wingsmith.adapters.store import artifacts as store
from wingsmith.domain.config import Settings
from wingsmith.domain.drafts import DraftContent, build_draft_content
from wingsmith.domain.hub.errors import HubError, HubRateLimited
from wingsmith.domain.hub.proposal import ArtifactProposal
from wingsmith.domain.recipes import evidence_for

log = get_logger("wingsmith.activities.artifact")


def hub_failure(exc: HubError) -> ApplicationError:
    """A Hub error as a Temporal failure: typed, retryable or not, waiting as long as the Hub asked."""
    delay = None
    if isinstance(exc, HubRateLimited) and exc.retry_after:
        from datetime import timedelta
        delay = timedelta(seconds=exc.retry_after)
    return ApplicationError(exc.message, type=type(exc).__name__, non_retryable=not exc.retryable,
                            next_retry_delay=delay)


class ArtifactActivities:
    def __init__(self, settings: Settings, db: asyncpg.Pool | None, resolver=None):
        self.settings = settings
        self.db = db
        self._resolver = resolver

    @property
    def resolver(self):
        if self._resolver is None:
            from wingsmith.adapters.hub.resolver import Resolver
            self._resolver = Resolver(self.settings.hf_endpoint, self.settings.hf_token_ref,
                                      self.settings.home_dir / "hf-cache")
        return self._resolver

    def _pool(self) -> asyncpg.Pool:
        return registry_pool(self.db)

    @activity.defn(name=contract.ACTIVITY_RESOLVE)
    def resolve_artifact(self, params: ResolveArtifactInput) -> ArtifactProposal:
        try:
            return self.resolver.resolve(f"hf:{params.repo_id}@{params.sha}")
        except HubError as exc:
            raise hub_failure(exc) from None

    @activity.defn(name=contract.ACTIVITY_GATHER_EVIDENCE)
    def gather_evidence(self, params: EvidenceInput) -> EvidenceResult:
        # A draft the watch opened for a catalog change reads the version it was opened for, even if
        # another has been put in force since.
        try:
            catalog = (load_catalog_version(params.catalog_version, self.settings.catalogs_dir)
                       if params.catalog_version else catalog_in_force(self.settings.catalogs_dir))
        except (LookupError, ValueError) as exc:
            raise ApplicationError(str(exc), type="CatalogUnavailable", non_retryable=True) from None
        match = catalog.find(params.repo_id)
        return EvidenceResult(catalog_version=catalog.version,
                              evidence=evidence_for(match, catalog) if match else None)

    @activity.defn(name=contract.ACTIVITY_SIZE_DRAFT)
    def size_draft(self, params: SizeDraftInput) -> DraftContent:
        # Variants whose checkpoint lives in another repo are sized from that repo when it resolves;
        # otherwise sizing derives their bytes and says so.
        resolved: dict[str, int] = {}
        for variant in params.evidence.variants if params.evidence else []:
            if variant.checkpoint.lower() == params.proposal.repo_id.lower():
                continue
            try:
                other = self.resolver.resolve(f"hf:{variant.checkpoint}")
            except HubError as exc:
                if exc.retryable:
                    raise hub_failure(exc) from None
                continue
            if other.weight_bytes:
                resolved[variant.checkpoint] = other.weight_bytes
        return build_draft_content(params.proposal, params.evidence, resolved, params.fleet_cards)

    @activity.defn(name=contract.ACTIVITY_SAVE_DRAFT)
    async def save_draft(self, params: SaveDraftInput) -> SaveDraftResult:
        superseded = await store.save_draft(
            self._pool(), workflow_id=params.workflow_id, artifact_id=params.artifact_id,
            repo_id=params.proposal.repo_id, revision=params.revision, sha=params.proposal.sha,
            requested_by=params.requested_by, proposal=params.proposal.model_dump(mode="json"),
            version=params.version, catalog_version=params.catalog_version,
            evidence=params.content.evidence.model_dump(mode="json") if params.content.evidence else {},
            sizing=params.content.model_dump(mode="json", include={"target", "sizing"}),
            warnings=params.content.warnings)
        return SaveDraftResult(superseded_workflows=superseded)

    @activity.defn(name=perf_contract.ACTIVITY_PERF_POLLED)
    async def perf_worker_polling(self, params: PerfPollingInput) -> bool:
        """Whether a perf worker polls the perf queue now (asked of Temporal, as the API asks about the
        kube queue): without one, a draft says the extra is not installed instead of waiting."""
        from temporalio.api.enums.v1 import TaskQueueType
        from temporalio.api.taskqueue.v1 import TaskQueue
        from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
        client = activity.client()
        described = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=client.namespace, task_queue=TaskQueue(name=params.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY))
        return bool(described.pollers)

    @activity.defn(name=perf_contract.ACTIVITY_SAVE_PERFORMANCE)
    async def save_draft_performance(self, params: SavePerformanceInput) -> None:
        performance = params.performance
        await store.save_performance(self._pool(), artifact_id=params.artifact_id, version=params.version,
                                     status=performance.status, reason=performance.reason,
                                     entries=[row.model_dump(mode="json") for row in performance.entries])

    @activity.defn(name=contract.ACTIVITY_RECORD_DECISION)
    async def record_decision(self, params: RecordDecisionInput) -> None:
        await store.record_decision(self._pool(), workflow_id=params.workflow_id, artifact_id=params.artifact_id,
                                    decision=params.decision)

    @activity.defn(name=contract.ACTIVITY_RECORD_EVENT)
    async def record_artifact_event(self, params: ArtifactEventInput) -> None:
        async with self._pool().acquire() as conn:
            await store.record_event(conn, source=params.workflow_id, step=params.step, subject=params.artifact_id,
                                     kind=params.kind, actor=params.actor, detail=params.detail)

    @activity.defn(name=contract.ACTIVITY_SET_STATE)
    async def set_artifact_state(self, params: ArtifactStateInput) -> None:
        await store.set_state(self._pool(), workflow_id=params.workflow_id, artifact_id=params.artifact_id,
                              state=params.state, step=params.step, detail=params.detail, repo_id=params.repo_id,
                              revision=params.revision, sha=params.sha, requested_by=params.requested_by)

    @activity.defn(name=contract.ACTIVITY_REMIND_REVIEWERS)
    async def remind_reviewers(self, params: ReminderInput) -> None:
        log.info("review reminder", artifact_id=params.artifact_id, deadline=params.deadline.isoformat(),
                 reminder=params.reminder)
        ref = self.settings.review_webhook_ref
        if not ref:
            return
        try:  # webhook URLs often embed a secret: read at call time, never logged
            url = read_secret_ref(ref, what="the review webhook URL", setting="WINGSMITH_REVIEW_WEBHOOK_REF")
        except SecretUnavailable as exc:
            # The log line above is the reminder; a misconfigured webhook must not fail the review.
            log.warning("review webhook not sent", reason=str(exc))
            return
        async with httpx.AsyncClient(timeout=10, verify=default_tls()) as client:
            response = await client.post(url, json={
                "event": "review_reminder", "artifact_id": params.artifact_id,
                "deadline": params.deadline.isoformat(), "reminder": params.reminder,
                "workflow_id": params.workflow_id})
        if response.status_code >= 500:
            raise ApplicationError(f"review webhook answered {response.status_code}", type="WebhookUnavailable")
        if response.status_code >= 400:
            log.warning("review webhook refused the reminder", status=response.status_code)

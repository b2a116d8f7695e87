"""ArtifactWorkflow (`artifact/<org>/<name>@<sha>`): resolve → evidence → sizing → save the draft →
wait for a person's review (update `review`, or signals `approve` / `reject`) until a deadline, with
reminders before it → record the decision.

Deterministic orchestration only: every I/O is an activity, time is `workflow.now()`, and the
review rules are the pure `check_review` shared by the update validator and the signal handlers.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

from contracts import artifact as contract
from contracts import draft_performance as perf_contract
from contracts.artifact import (
    RESOLVE_FAILED,
    ArtifactEventInput,
    ArtifactOutcome,
    ArtifactStateInput,
    ArtifactStatus,
    ArtifactWorkflowInput,
    EvidenceInput,
    EvidenceResult,
    FollowApproval,
    RecordDecisionInput,
    RefusedDecision,
    ReminderInput,
    ResolveArtifactInput,
    SaveDraftInput,
    SaveDraftResult,
    SizeDraftInput,
    artifact_id,
    search_attributes,
)
from contracts.draft_performance import DraftPerformanceInput, performance_workflow_id
from contracts.ids import STAGE
from contracts.inventory import ACTIVITY_READ_INVENTORY, ReadInventoryInput
from contracts.watch import ACTIVITY_ENSURE_SCHEDULE, EnsureWatchInput, WatchInput
from contracts.workload import ACTIVITY_LIST_CLUSTERS, ClusterTarget, ClusterTargets, NoInput
from wingsmith.domain.config import perf_task_queue
from wingsmith.domain.draft_performance import estimate_requests
from wingsmith.domain.drafts import DraftContent
from wingsmith.domain.hub.proposal import ArtifactProposal
from wingsmith.domain.placement.models import ClusterInventory
from wingsmith.domain.review import (
    SIGNALS_OFF,
    Decision,
    DraftFacts,
    RecordedDecision,
    ReviewRefused,
    ReviewRequest,
    ReviewSignal,
    check_review,
    check_signal_reviewer,
)
from wingsmith.domain.watch import watchable
from workflows import policies
from workflows.children import leave_running


@workflow.defn(name=contract.WORKFLOW)
class ArtifactWorkflow:
    @workflow.init
    def __init__(self, params: ArtifactWorkflowInput) -> None:
        self.params = params
        self.id = artifact_id(params.repo_id, params.sha, params.catalog_version)
        self.stage = "resolving"
        self.draft: DraftFacts | None = None
        self.deadline: datetime | None = None
        self.decision: RecordedDecision | None = None
        self.refused: list[RefusedDecision] = []
        self.reminders_sent = 0
        self.failure: str | None = None

    @workflow.run
    async def run(self, params: ArtifactWorkflowInput) -> ArtifactOutcome:
        wf_id = workflow.info().workflow_id
        # Its own attributes, so an artifact started from user code is found like one the API started.
        workflow.upsert_search_attributes([pair.key.value_set(pair.value) for pair in search_attributes(params)])
        try:
            proposal = await workflow.execute_activity(
                contract.ACTIVITY_RESOLVE, ResolveArtifactInput(repo_id=params.repo_id, sha=params.sha),
                result_type=ArtifactProposal, **policies.HUB_RESOLVE)
            evidence = await workflow.execute_local_activity(
                contract.ACTIVITY_GATHER_EVIDENCE,
                EvidenceInput(repo_id=params.repo_id, catalog_version=params.catalog_version),
                result_type=EvidenceResult, **policies.DRAFT_COMPUTE)
            cards = await _fleet_cards(params.kube_task_queue)
            content = await workflow.execute_local_activity(
                contract.ACTIVITY_SIZE_DRAFT,
                SizeDraftInput(proposal=proposal, evidence=evidence.evidence, fleet_cards=cards),
                result_type=DraftContent, **policies.DRAFT_COMPUTE)
        except ActivityError as err:
            return await self._fail(err)

        version = 1
        saved = await workflow.execute_local_activity(contract.ACTIVITY_SAVE_DRAFT, SaveDraftInput(
            workflow_id=wf_id, artifact_id=self.id, revision=params.revision, requested_by=params.requested_by,
            version=version, proposal=proposal, catalog_version=evidence.catalog_version, content=content),
            result_type=SaveDraftResult, **policies.REGISTRY)
        for older in saved.superseded_workflows:
            # Best effort: an older draft that already ended needs no telling.
            try:
                await workflow.get_external_workflow_handle(older).signal(contract.SIGNAL_SUPERSEDED, self.id)
            except Exception:  # noqa: BLE001 - the row is already marked superseded
                pass
        self.draft = content.facts(version)
        self.deadline = workflow.now() + timedelta(seconds=params.policy.deadline_seconds)
        self._set_stage("draft")
        await self._estimate_performance(wf_id, version, proposal, content, cards)

        await self._wait_for_review()

        if self.decision is not None and self.stage != "superseded":
            await workflow.execute_local_activity(contract.ACTIVITY_RECORD_DECISION, RecordDecisionInput(
                workflow_id=wf_id, artifact_id=self.id, decision=self.decision), **policies.REGISTRY)
            self._set_stage({"approve": "approved", "reject": "rejected", "expire": "expired"}[self.decision.decision])
            if self.stage == "approved" and watchable(params.revision):
                # From now on the branch is watched: a new commit opens a new draft against this one.
                await workflow.execute_activity(ACTIVITY_ENSURE_SCHEDULE, EnsureWatchInput(
                    watch=WatchInput(repo_id=params.repo_id, branch=params.revision, policy=params.policy),
                    task_queue=workflow.info().task_queue, requested_by=params.requested_by, team=params.team),
                    result_type=str, **policies.REGISTRY_SCHEDULED)
                await self._tell_followers(wf_id)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return ArtifactOutcome(artifact_id=self.id, stage=self.stage, decision=self.decision)

    async def _estimate_performance(self, wf_id: str, version: int, proposal: ArtifactProposal,
                                    content: DraftContent, cards: list[str] | None) -> None:
        """Start the draft's estimates beside it: the draft is already saved and the review never waits for
        them; abandoned rather than ended with the review, so a quick decision still gets its figures."""
        requests = estimate_requests(proposal, content.evidence, content.target, cards)
        try:
            estimates = await workflow.start_child_workflow(
                perf_contract.WORKFLOW, DraftPerformanceInput(
                    artifact_id=self.id, version=version, requests=requests,
                    perf_task_queue=perf_task_queue(workflow.info().task_queue)),
                id=performance_workflow_id(wf_id, version), parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"Expected performance of {self.id}, draft {version}")
        except WorkflowAlreadyStartedError:
            return  # a retried start: the estimates are already on their way
        leave_running(estimates)  # a draft ended or an operator's terminate is the estimates' own to tell

    async def _wait_for_review(self) -> None:
        """Sleep until a decision, sending reminders before the deadline; expire at the deadline."""
        assert self.deadline is not None and self.draft is not None  # set together when the draft is ready
        reminders = sorted(self.deadline - timedelta(seconds=s) for s in self.params.policy.remind_before_seconds)
        for at in [r for r in reminders if r > workflow.now()] + [self.deadline]:
            timeout = (at - workflow.now()).total_seconds()
            try:
                await workflow.wait_condition(self._settled, timeout=max(timeout, 0.001),
                                              timeout_summary="review deadline or reminder")
                return
            except TimeoutError:
                pass
            if at == self.deadline:
                self.decision = RecordedDecision(decision="expire", reviewer="wingsmith", via="timer",
                                                 comment="no review before the deadline",
                                                 draft_version=self.draft.version, decided_at=workflow.now())
                return
            self.reminders_sent += 1
            await workflow.execute_local_activity(contract.ACTIVITY_REMIND_REVIEWERS, ReminderInput(
                workflow_id=workflow.info().workflow_id, artifact_id=self.id, deadline=self.deadline,
                reminder=self.reminders_sent), **policies.REGISTRY)

    async def _tell_followers(self, wf_id: str) -> None:
        """The workloads on an older artifact of this branch: `follow: auto` ones get the upgrade
        update, manual ones an event. Best effort: the approval stands whatever they answer."""
        assert self.decision is not None
        try:
            await workflow.execute_activity(contract.ACTIVITY_UPGRADE_FOLLOWERS, FollowApproval(
                workflow_id=wf_id, artifact_id=self.id, approver=self.decision.reviewer), **policies.FOLLOW)
        except ActivityError as err:
            workflow.logger.warning("follow: the workloads on older artifacts were not all told: %s", err.cause)

    def _settled(self) -> bool:
        return self.decision is not None or self.stage == "superseded"

    # --- the review, as an update -------------------------------------------------------------

    @workflow.update(name=contract.UPDATE_REVIEW)
    async def review(self, request: ReviewRequest) -> ArtifactStatus:
        self.decision = RecordedDecision(decision=request.decision, reviewer=request.reviewer, via="api",
                                         comment=request.comment, draft_version=request.draft_version,
                                         selections=request.selections, decided_at=workflow.now())
        await workflow.wait_condition(lambda: self.stage != "draft")
        return self.status()

    @review.validator
    def _validate_review(self, request: ReviewRequest) -> None:
        try:
            self._check(request.decision, request.reviewer, request.draft_version, request)
        except ReviewRefused as refused:
            raise ApplicationError(refused.message, type=refused.kind, non_retryable=True) from None

    # --- the review, as signals (Temporal UI, `temporal workflow signal`) -----------------------

    @workflow.signal(name=contract.SIGNAL_APPROVE)
    async def approve(self, signal: ReviewSignal) -> None:
        await self._on_signal("approve", signal)

    @workflow.signal(name=contract.SIGNAL_REJECT)
    async def reject(self, signal: ReviewSignal) -> None:
        await self._on_signal("reject", signal)

    @workflow.signal(name=contract.SIGNAL_SUPERSEDED)
    def superseded(self, by: str) -> None:
        if self.decision is None:
            self.stage = "superseded"
            self.failure = f"superseded by {by}"

    async def _on_signal(self, decision: Decision, signal: ReviewSignal) -> None:
        reviewer = f"{signal.reviewer} (via Temporal)"
        version = signal.draft_version or (self.draft.version if self.draft else 0)
        try:
            if not self.params.policy.signal_decisions:
                raise ReviewRefused(SIGNALS_OFF, "decisions by signal are turned off; use the review API")
            policy = self.params.policy
            check_signal_reviewer(signal.reviewer, policy.signal_reviewers, requested_by=self.params.requested_by,
                                  four_eyes=policy.four_eyes)
            self._check(decision, signal.reviewer, version, signal)
        except ReviewRefused as refused:
            # A signal cannot be rejected like an update; it is recorded as refused and changes nothing.
            self.refused.append(RefusedDecision(via="signal", decision=decision, reviewer=reviewer,
                                                reason=refused.message, kind=refused.kind, at=workflow.now()))
            await workflow.execute_local_activity(contract.ACTIVITY_RECORD_EVENT, ArtifactEventInput(
                workflow_id=workflow.info().workflow_id, artifact_id=self.id,
                step=f"signal-refused:{len(self.refused)}", kind="decision_refused", actor=reviewer,
                detail={"decision": decision, "reason": refused.message, "kind": refused.kind}), **policies.REGISTRY)
            return
        self.decision = RecordedDecision(decision=decision, reviewer=reviewer, via="signal", comment=signal.comment,
                                         draft_version=version, selections=signal.selections,
                                         decided_at=workflow.now())

    def _check(self, decision: Decision, reviewer: str, draft_version: int, body: ReviewRequest | ReviewSignal) -> None:
        if self.stage == "superseded":
            raise ReviewRefused("Superseded", f"this artifact was {self.failure}")
        check_review(decision, reviewer, draft_version, body.selections, draft=self.draft, decided=self.decision,
                     requested_by=self.params.requested_by, four_eyes=self.params.policy.four_eyes)

    @workflow.query(name=contract.QUERY_STATUS)
    def status(self) -> ArtifactStatus:
        return ArtifactStatus(artifact_id=self.id, stage=self.stage, requested_by=self.params.requested_by,
                              draft=self.draft, deadline=self.deadline, decision=self.decision,
                              refused=self.refused, reminders_sent=self.reminders_sent, failure=self.failure)

    # --- helpers ----------------------------------------------------------------------------------

    def _set_stage(self, stage: str) -> None:
        self.stage = stage
        workflow.upsert_search_attributes([STAGE.value_set(stage)])

    async def _fail(self, err: ActivityError) -> ArtifactOutcome:
        cause = err.cause
        kind = cause.type if isinstance(cause, ApplicationError) and cause.type else RESOLVE_FAILED
        self.failure = f"{kind}: {cause.message if isinstance(cause, FailureError) else err}"
        p = self.params
        await workflow.execute_local_activity(contract.ACTIVITY_SET_STATE, ArtifactStateInput(
            workflow_id=workflow.info().workflow_id, artifact_id=self.id, repo_id=p.repo_id, revision=p.revision,
            sha=p.sha, requested_by=p.requested_by, state="failed", step="failed",
            detail={"cause": self.failure}), **policies.REGISTRY)
        self._set_stage("failed")
        raise ApplicationError(self.failure, type=kind, non_retryable=True)


async def _fleet_cards(kube_task_queue: str | None) -> list[str] | None:
    """The cards the registered clusters have (None: no cluster is registered): from a manual inventory,
    else from a live read on the kube queue when one is named."""
    targets = await workflow.execute_activity(ACTIVITY_LIST_CLUSTERS, NoInput(), result_type=ClusterTargets,
                                              **policies.REGISTRY_SCHEDULED)
    if not targets.clusters:
        return None

    async def inventory(target: ClusterTarget) -> ClusterInventory | None:
        if target.manual_inventory is not None:
            return target.manual_inventory
        if kube_task_queue is None:
            return None
        try:
            return await workflow.execute_activity(
                ACTIVITY_READ_INVENTORY, ReadInventoryInput(cluster=target.info.name, kubeconfig=target.kubeconfig),
                result_type=ClusterInventory, **policies.fleet_inventory_read(kube_task_queue))
        except ActivityError:
            return None
    found = await asyncio.gather(*(inventory(t) for t in targets.clusters if not t.info.cordoned))
    return sorted({pool.hardware_id for inv in found if inv for pool in inv.pools if pool.hardware_id})

"""WatchWorkflow: one run of the watch on upstream, started by the Schedule `watch/<org>/<name>@<branch>`
(daily by default; `wingsmith watch trigger` runs it now). It asks where the branch points; when that is
a commit newer than the approved artifact and no artifact exists for it yet, it opens a new draft (an
ArtifactWorkflow that outlives this run) and announces it."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

from contracts import artifact as artifact_contract
from contracts import watch as contract
from contracts.artifact import ArtifactWorkflowInput, artifact_id, artifact_workflow_id
from contracts.ids import MODEL, STAGE
from contracts.watch import ACTIVITY_CHECK, ACTIVITY_NOTIFY, UpstreamCheck, WatchInput, WatchNotice, WatchOutcome
from workflows import policies
from workflows.children import leave_running


@workflow.defn(name=contract.WORKFLOW)
class WatchWorkflow:
    @workflow.run
    async def run(self, params: WatchInput) -> WatchOutcome:
        workflow.upsert_search_attributes([MODEL.value_set(params.repo_id), STAGE.value_set("watching")])
        check = await workflow.execute_activity(ACTIVITY_CHECK, params, result_type=UpstreamCheck,
                                                **policies.WATCH_CHECK)
        outcome = WatchOutcome(repo_id=params.repo_id, branch=params.branch, head_sha=check.head_sha,
                               catalog_version=check.catalog_version, note="")
        if check.moved:
            if check.known:
                outcome.note = f"{check.head_sha[:12]} has an artifact already"
            else:
                await self._open(params, check, outcome, check.head_sha, None)
        elif check.approved_sha is None:
            outcome.note = "no approved artifact to compare with"
        elif check.evidence_moved:
            # Same commit, new recipe evidence: a review of its own (`...@<sha>+recipes-<hash>`).
            if check.evidence_known:
                outcome.note = f"catalog {check.catalog_version} has a draft for this model already"
            else:
                await self._open(params, check, outcome, check.approved_sha, check.catalog_version)
        else:
            outcome.note = "unchanged"
        workflow.upsert_search_attributes([STAGE.value_set("opened" if outcome.opened else "unchanged")])
        return outcome

    async def _open(self, params: WatchInput, check: UpstreamCheck, outcome: WatchOutcome, sha: str,
                    catalog_version: str | None) -> None:
        opened = artifact_id(params.repo_id, sha, catalog_version)
        why = f"recipe catalog {catalog_version}" if catalog_version else f"{params.branch} moved to {sha[:12]}"
        try:
            draft = await workflow.start_child_workflow(
                artifact_contract.WORKFLOW, ArtifactWorkflowInput(
                    repo_id=params.repo_id, revision=params.branch, sha=sha,
                    requested_by=f"watch {params.repo_id}@{params.branch}", policy=params.policy,
                    catalog_version=catalog_version, kube_task_queue=params.kube_task_queue),
                id=artifact_workflow_id(params.repo_id, sha, catalog_version),
                parent_close_policy=ParentClosePolicy.ABANDON,  # the draft waits for its review, not for us
                static_summary=f"Review {opened} (opened by the watch: {why})")
        except WorkflowAlreadyStartedError:
            outcome.note = f"a draft for {opened} is open already"
            return
        leave_running(draft)
        outcome.opened = opened
        outcome.note = f"{why}: draft {opened} opened"
        await workflow.execute_activity(ACTIVITY_NOTIFY, WatchNotice(
            repo_id=params.repo_id, branch=params.branch, approved_id=check.approved_id, new_artifact_id=opened,
            head_sha=sha, reason="recipe catalog" if catalog_version else "new commit",
            catalog_version=catalog_version), **policies.WATCH_NOTIFY)

"""WatchWorkflow: one run of the watch on upstream, started by the Schedule `watch/<org>/<name>@<branch>`
(daily by default; `wingsmith watch trigger` runs it now). It asks where the branch points; when that is
a commit newer than the approved artifact and no artifact exists for it yet, it opens a new draft (an
ArtifactWorkflow that outlives this run) and announces it."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

from workflows.artifact import ArtifactWorkflow
from workflows.ids import MODEL, STAGE, artifact_workflow_id

with workflow.unsafe.imports_passed_through():
    from activities.watch import WatchActivities
    from wingsmith.artifacts import ArtifactWorkflowInput, artifact_id
    from wingsmith.watch import WatchInput, WatchNotice, WatchOutcome

_HUB = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(minutes=2),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=5), maximum_interval=timedelta(minutes=5),
                             maximum_attempts=10,
                             non_retryable_error_types=["RepoNotFound", "RevisionNotFound", "GatedRepo"]))
_NOTIFY = workflow.ActivityConfig(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=5), maximum_attempts=5))


@workflow.defn
class WatchWorkflow:
    @workflow.run
    async def run(self, params: WatchInput) -> WatchOutcome:
        workflow.upsert_search_attributes([MODEL.value_set(params.repo_id), STAGE.value_set("watching")])
        check = await workflow.execute_activity_method(WatchActivities.check, params, **_HUB)
        outcome = WatchOutcome(repo_id=params.repo_id, branch=params.branch, head_sha=check.head_sha, note="")
        if not check.moved:
            outcome.note = "no approved artifact to compare with" if check.approved_sha is None else "unchanged"
        elif check.known:
            outcome.note = f"{check.head_sha[:12]} has an artifact already"
        else:
            opened = artifact_id(params.repo_id, check.head_sha)
            try:
                await workflow.start_child_workflow(
                    ArtifactWorkflow.run, ArtifactWorkflowInput(
                        repo_id=params.repo_id, revision=params.branch, sha=check.head_sha,
                        requested_by=f"watch {params.repo_id}@{params.branch}", policy=params.policy),
                    id=artifact_workflow_id(params.repo_id, check.head_sha),
                    parent_close_policy=ParentClosePolicy.ABANDON,  # the draft waits for its review, not for us
                    static_summary=f"Review {params.repo_id}@{check.head_sha[:12]} (opened by the watch)")
            except WorkflowAlreadyStartedError:
                outcome.note = f"a draft for {check.head_sha[:12]} is open already"
                return outcome
            outcome.opened = opened
            outcome.note = f"{params.branch} moved to {check.head_sha[:12]}: draft {opened} opened"
            await workflow.execute_activity_method(WatchActivities.notify, WatchNotice(
                repo_id=params.repo_id, branch=params.branch, approved_id=check.approved_id,
                new_artifact_id=opened, head_sha=check.head_sha), **_NOTIFY)
        workflow.upsert_search_attributes([STAGE.value_set("opened" if outcome.opened else "unchanged")])
        return outcome

"""The next version of the plane, for tests/production/test_plane_upgrade.py: the WorkloadWorkflow
with one change in the way the policy says (docs/production.md, "Upgrading the plane"): when a
watched workload next acts on what its clusters said, it records which plane version it runs on (a
memo: one more command in its history), under `workflow.patched`. `UnguardedWorkloadWorkflow` makes
the same change without the patch, to show what the guard prevents.

Kept out of workflows/: it is a test's version N+1, not the product's.
"""

from __future__ import annotations

from temporalio import workflow

from contracts.workload import WORKFLOW, WorkloadStatus, WorkloadWorkflowInput
from workflows.workload import WorkloadWorkflow

PATCH = "plane-version-memo"
MEMO_KEY = "wingsmith_plane_version"
NEXT = "n1"


@workflow.defn(name=WORKFLOW)
class NextWorkloadWorkflow(WorkloadWorkflow):
    guarded = True

    @workflow.init
    def __init__(self, params: WorkloadWorkflowInput) -> None:
        super().__init__(params)
        act = self.observer.act_on_news
        said = False

        async def act_and_say_so() -> None:
            nonlocal said
            if not said and (not self.guarded or workflow.patched(PATCH)):
                said = True
                workflow.upsert_memo({MEMO_KEY: NEXT})
            await act()
        self.observer.act_on_news = act_and_say_so  # type: ignore[method-assign]

    @workflow.run
    async def run(self, params: WorkloadWorkflowInput) -> WorkloadStatus:
        return await super().run(params)


@workflow.defn(name=WORKFLOW)
class UnguardedWorkloadWorkflow(NextWorkloadWorkflow):
    guarded = False

    @workflow.init
    def __init__(self, params: WorkloadWorkflowInput) -> None:
        super().__init__(params)

    @workflow.run
    async def run(self, params: WorkloadWorkflowInput) -> WorkloadStatus:
        return await super().run(params)

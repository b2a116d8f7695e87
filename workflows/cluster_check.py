"""ClusterCheckWorkflow (`cluster-check/<cluster>/<nonce>`): a member cluster's preflight, run on the kube
task queue, its checklist returned to the caller (the API, which records it on the cluster).

It exists so that the API process never builds a Kubernetes client (as LiveInventoryWorkflow). Reads
only, so a retried or repeated run changes nothing; a short timeout, because a person waits on it.

The one pinned workflow type under Worker Versioning (every other type is auto-upgrade): a checklist is
the judgement of one plane version, its permission list included, so a run that a plane upgrade overtakes
ends on the version it started on. It may: it lives seconds and the caller bounds it (an execution timeout
of CHECK_SECONDS + 15 s), so a run whose version's workers are already gone ends at that timeout as "check
not run", and the next check runs on the current version (docs/production.md, "Upgrading the plane").
A versioned worker registers PinnedClusterCheckWorkflow (worker/registry.py); an unversioned one (`wingsmith
up`, the tests) the plain type, since the SDK refuses a versioning behaviour on a worker without versioning.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

from contracts import cluster_check as contract
from contracts.cluster_check import ACTIVITY_CHECK_CLUSTER, ClusterCheckInput
from wingsmith.domain.member_clusters import Preflight
from workflows import policies


@workflow.defn(name=contract.WORKFLOW)
class ClusterCheckWorkflow:
    @workflow.run
    async def run(self, params: ClusterCheckInput) -> Preflight:
        return await workflow.execute_activity(
            ACTIVITY_CHECK_CLUSTER, params, result_type=Preflight,
            **policies.cluster_check(params.kube_task_queue, params.check_seconds))


@workflow.defn(name=contract.WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class PinnedClusterCheckWorkflow(ClusterCheckWorkflow):
    """The same check, pinned to the plane version it starts on: what a versioned worker runs."""

    @workflow.run
    async def run(self, params: ClusterCheckInput) -> Preflight:
        return await super().run(params)

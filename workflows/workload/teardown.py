"""The end of a workload: the teardown a delete asks for (endpoints drained, every deployment removed,
retried like a Kubernetes finalizer), and the saga's compensation when its first rollout fails."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from contracts import conditions as reason
from contracts.workload import WORKLOAD_FAILED, WorkloadStatus
from workflows.workload.cluster_ops import ClusterOps
from workflows.workload.state import Workload


async def tear_down(workload: Workload, ops: ClusterOps) -> None:
    """The caller holds the lock."""
    workload.set_stage("deleting")
    await workload.record("deleting", "deleting", {"by": workload.delete_by})
    await ops.drain_workload()
    await ops.remove_everywhere()
    if workload.state.clusters:
        await _retry_leftover_deletes(workload, ops)
    workload.set_stage("deleted")
    await workload.record("deleted", "deleted", {"by": workload.delete_by})


async def _retry_leftover_deletes(workload: Workload, ops: ClusterOps) -> None:
    """Like a Kubernetes finalizer: "deleted" means no DGD is left. A cluster that refuses the delete
    (access revoked, API down) is retried with backoff, its error in the events, until the cause is
    fixed; a cluster no longer registered cannot be reached, so its DGD is reported left."""
    clusters = workload.state.clusters
    wait = max(5.0, workload.params.poll_seconds * 10)
    while clusters:
        registered = await ops.targets()
        for name in sorted(set(clusters) - set(registered)):
            workload.event(reason.CLUSTER_UNREGISTERED, f"{name} is no longer registered: its deployment, if any, "
                           "is left there", cluster=name)
            del clusters[name]
        if not clusters:
            return
        errors = {n: c.error or "not removed" for n, c in sorted(clusters.items())}
        said = "; ".join(f"{n}: {e}" for n, e in errors.items())
        workload.event(reason.DEPLOYMENTS_LEFT, f"deployments left ({said}); retrying in {wait:.0f}s",
                       clusters=errors, retry_seconds=wait)
        await workflow.sleep(timedelta(seconds=wait))
        wait = min(wait * 2, 300.0)
        await ops.remove_everywhere()


async def roll_back(workload: Workload, ops: ClusterOps, cause: str,
                    reraise: BaseException | None = None) -> WorkloadStatus:
    """The saga's compensation: remove every DGD this workload applied, then fail with the cause.
    Shielded so that a cancellation arriving meanwhile cannot leave half the clusters behind."""
    workload.state.failure = cause
    workload.event(reason.ROLLING_BACK, f"rolling back: {cause}", cause=cause)
    await asyncio.shield(asyncio.ensure_future(ops.remove_everywhere()))
    workload.set_stage("failed")
    await workload.record("failed", "failed", {"cause": cause})
    if reraise is not None:
        raise reraise
    raise ApplicationError(f"workload {workload.plan.workload_id} could not be placed and served: {cause}",
                           type=WORKLOAD_FAILED, non_retryable=True)

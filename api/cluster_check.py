"""A member cluster's preflight, asked for by the API (registration, `POST /v1/clusters/{name}/check`) and
the console: the checks run in the worker (ClusterCheckWorkflow on the kube task queue; the API process
never loads a kubeconfig), and the checklist they answer is recorded on the cluster, where placement
reads it (a failing line keeps the cluster from taking replicas; a passing check clears that).

A check that could not run (no worker polling, no answer in time) records nothing: what was known of the
cluster stays as it was, and the answer says why there is no new checklist (`check_not_run`).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import asyncpg
from fastapi import Request
from pydantic import Field
from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError

from api.errors import ApiError
from contracts import cluster_check as contract
from contracts.cluster_check import ClusterCheckInput
from wingsmith.config import Settings
from wingsmith.member_clusters import Preflight
from wingsmith.store import clusters as store
from wingsmith.store.clusters import ClusterRecord

# The checks take at most contract.CHECK_SECONDS on the cluster; a little more for the worker to start them.
CHECK_WAIT_SECONDS = contract.CHECK_SECONDS + 15
# Checks of one API process at once; more wait their turn (each holds a worker's kube slot for seconds).
CHECKS_AT_ONCE = 4


class ClusterChecked(ClusterRecord):
    check_not_run: str | None = Field(
        default=None, description="why no preflight ran now (its last checklist, if any, is kept as it was)")


async def check_and_record(request: Request, settings: Settings, db: asyncpg.Pool,
                           record: ClusterRecord) -> ClusterChecked:
    """Run the cluster's preflight in the worker and record its checklist on the cluster."""
    # Imported here: the clusters routes call this module, and the worker check lives with them.
    from api.routes.clusters import missing_worker

    temporal = getattr(request.app.state, "temporal", None)
    missing = await missing_worker(temporal, settings)
    if missing:
        # Its words end on live inventories (the dry run's reason); the first clause is what is missing.
        why = missing.split("; live inventories")[0]
        return ClusterChecked(**record.model_dump(), check_not_run=f"{why}; preflight checks run in the worker")
    assert temporal is not None
    state = request.app.state
    if getattr(state, "cluster_checks", None) is None:
        state.cluster_checks = asyncio.Semaphore(CHECKS_AT_ONCE)
    params = ClusterCheckInput(cluster=record.name, kubeconfig=record.kubeconfig_ref(),
                               namespace=settings.deploy_namespace, hf_token_secret=settings.hf_token_secret,
                               kube_task_queue=settings.kube_task_queue)
    summary, details = contract.cluster_check_summary(record.name)
    async with state.cluster_checks:
        try:
            preflight = await temporal.execute_workflow(
                contract.WORKFLOW, params, result_type=Preflight,
                id=contract.cluster_check_workflow_id(record.name, uuid.uuid4().hex[:12]),
                task_queue=settings.task_queue,
                execution_timeout=timedelta(seconds=CHECK_WAIT_SECONDS), static_summary=summary, static_details=details)
        except (WorkflowFailureError, RPCError) as exc:
            return ClusterChecked(**record.model_dump(), check_not_run=f"no answer from the worker within "
                                                                      f"{CHECK_WAIT_SECONDS:g}s ({type(exc).__name__})")
    updated = await store.set_preflight(db, record.name, preflight)
    if updated is None:
        raise ApiError(404, f"cluster {record.name!r} is not registered (removed while it was checked)")
    return ClusterChecked(**updated.model_dump())

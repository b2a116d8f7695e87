"""A member cluster's checks, asked for at registration, by `POST /v1/clusters/{name}/check` and by the
console's "Check again".

- The kubeconfig reference is checked when a cluster is registered: its syntax and a file's place always,
  the content too when it is readable here, parsed in a child process, never on the event loop.
- The preflight runs in the worker (ClusterCheckWorkflow on the kube task queue; the API process never
  loads a kubeconfig), and the checklist it answers is recorded on the cluster, where placement reads it
  (a failing line keeps the cluster from taking replicas; a passing check clears that). A check that could
  not run (no worker polling, no answer in time) records nothing: what was known of the cluster stays as
  it was, and the answer says why there is no new checklist (`check_not_run`).
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from datetime import timedelta
from pathlib import Path

import asyncpg
from pydantic import Field
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from api.errors import ApiError
from api.services.inventories import missing_worker
from contracts import cluster_check as contract
from contracts.cluster_check import ClusterCheckInput
from wingsmith.adapters.kube import KubeError
from wingsmith.adapters.kube.kubeconfig import KubeconfigBeyondLimit, KubeconfigPolicy, check_reference, read_source
from wingsmith.adapters.kube.kubeconfig_check import check_in_child
from wingsmith.adapters.store import clusters as store
from wingsmith.adapters.store.clusters import ClusterRecord, ClusterSpec
from wingsmith.domain.config import Settings
from wingsmith.domain.member_clusters import Preflight

# The checks take at most contract.CHECK_SECONDS on the cluster; a little more for the worker to start them.
CHECK_WAIT_SECONDS = contract.CHECK_SECONDS + 15
# Checks of one API process at once; more wait their turn (each holds a worker's kube slot for seconds).
CHECKS_AT_ONCE = 4
# Parsing a kubeconfig is CPU work, bounded by the loader's limits (~0.2 s to refuse one past them, ~0.7 s
# for one just within), done in a child process; registrations sent together beyond this many queue, so
# they cannot take every core of the API's machine.
KUBECONFIG_CHECKS_AT_ONCE = 2


class ClusterChecks:
    """One API process's bounds on the checks it runs at once."""

    def __init__(self) -> None:
        self.preflights = asyncio.Semaphore(CHECKS_AT_ONCE)
        self.kubeconfigs = asyncio.Semaphore(KUBECONFIG_CHECKS_AT_ONCE)


class ClusterChecked(ClusterRecord):
    check_not_run: str | None = Field(
        default=None, description="why no preflight ran now (its last checklist, if any, is kept as it was)")


async def check_and_record(record: ClusterRecord, *, db: asyncpg.Pool, temporal: Client | None,
                           settings: Settings, checks: ClusterChecks) -> ClusterChecked:
    """Run the cluster's preflight in the worker and record its checklist on the cluster."""
    missing = await missing_worker(temporal, settings)
    if missing:
        # Its words end on live inventories (the dry run's reason); the first clause is what is missing.
        why = missing.split("; live inventories")[0]
        return ClusterChecked(**record.model_dump(), check_not_run=f"{why}; preflight checks run in the worker")
    assert temporal is not None
    params = ClusterCheckInput(cluster=record.name, kubeconfig=record.kubeconfig_ref(),
                               namespace=settings.deploy_namespace, hf_token_secret=settings.hf_token_secret,
                               kube_task_queue=settings.kube_task_queue)
    summary, details = contract.cluster_check_summary(record.name)
    async with checks.preflights:
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


async def check_kubeconfig(spec: ClusterSpec, *, settings: Settings, checks: ClusterChecks) -> None:
    """The reference's syntax and a file's place always; the content too when it is readable here (a
    file on this machine, a variable in this process), read in a thread and parsed and checked in a
    child process (wingsmith/adapters/kube/kubeconfig_check.py), never on the event loop. The worker's loader
    checks everything again before it builds any client: the content may live only where the worker runs."""
    policy = KubeconfigPolicy.from_settings(settings)
    try:
        source = check_reference(spec.kubeconfig, policy)
        here = (source.kind == "file" and source.path is not None and _on_this_machine(source.path)) or (
            source.kind == "env" and bool(os.environ.get(source.env)))
        if not here:
            return
        async with checks.kubeconfigs:
            content = await asyncio.to_thread(read_source, source, policy)
            await asyncio.to_thread(check_in_child, content, spec.kube_context or None, policy, source)
    except KubeError as exc:
        # "KubeconfigPathList" -> "kubeconfig_path_list": the code names the reason.
        code = re.sub(r"(?<!^)(?=[A-Z])", "_", exc.type).lower()
        details: dict[str, object] = {"field": "kubeconfig"}
        if isinstance(exc, KubeconfigBeyondLimit):
            details |= {"limit": exc.limit, "bound": exc.bound}
        raise ApiError(422, exc.message, code=code, details=details) from None


def _on_this_machine(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long for this file system: the loader names the error (422)
        return True

"""Worker Versioning: which plane version a worker is, and when that version takes over.

A worker started with a deployment name and a build id (`TEMPORAL_DEPLOYMENT_NAME`,
`TEMPORAL_WORKER_BUILD_ID`: the names the Temporal Worker Controller injects; the manifests take the
build id from the image tag) polls as that Worker Deployment Version. Workflow types are auto-upgrade
by default: when a new version becomes current, each running workflow's next task goes to the new
version's workers (and never back to the old ones), so a change to a workflow's commands is guarded
with `workflow.patched` (docs/production.md, "Upgrading the plane"). Pinning would leave a workflow
that lives for months on workers that a rolling update of a Kubernetes Deployment removes; the one
pinned type is the short, time-bounded cluster check (workflows/cluster_check.py).

A version becomes current by itself: its workers ask for it once every task queue the current
version polls is polled by the new version too (checked here: the server would accept it sooner, and
a queue whose new workers are still starting would hold its tasks). A version that has been current before is never made
current again by a worker: going back is a person's decision (`temporal worker deployment
set-current-version`), so an old pod restarting during a rollout cannot undo it.
"""

from __future__ import annotations

import asyncio

from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentVersionRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from wingsmith.adapters.logs import get_logger
from wingsmith.domain.config import Settings

log = get_logger("wingsmith.worker.versioning")
# Temporal restarting or busy: the worker keeps polling meanwhile, and asks again.
_TRANSIENT = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.RESOURCE_EXHAUSTED)
_ACTIVE = {WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT,
           WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING}


def deployment_version(settings: Settings) -> WorkerDeploymentVersion | None:
    """This worker's version, None when the plane runs unversioned (`wingsmith up`, tests)."""
    if not settings.worker_deployment:
        return None
    return WorkerDeploymentVersion(settings.worker_deployment, settings.worker_build_id or "")


def deployment_config(version: WorkerDeploymentVersion | None) -> WorkerDeploymentConfig | None:
    if version is None:
        return None
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True,
                                  default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE)


async def version_status(client: Client, version: WorkerDeploymentVersion) -> int | None:
    """The version's status in its deployment (WorkerDeploymentVersionStatus), None while unknown; a
    version still short of a task queue the current one polls counts as unknown."""
    try:
        described = await client.workflow_service.describe_worker_deployment(DescribeWorkerDeploymentRequest(
            namespace=client.namespace, deployment_name=version.deployment_name))
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    info = described.worker_deployment_info
    for summary in info.version_summaries:
        if summary.deployment_version.build_id == version.build_id:
            if summary.HasField("first_activation_time") and summary.status not in _ACTIVE:
                return WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING
            current = info.routing_config.current_deployment_version
            if summary.status not in _ACTIVE and current.build_id and (
                    await _queues(client, WorkerDeploymentVersion(version.deployment_name, current.build_id))
                    - await _queues(client, version)):
                # The server would make it current anyway, and the queue's tasks would wait for the
                # new version's workers that are still starting (a rollout rolls each queue's own pods).
                return None
            return summary.status
    return None


async def _queues(client: Client, version: WorkerDeploymentVersion) -> set[tuple[str, int]]:
    described = await client.workflow_service.describe_worker_deployment_version(
        DescribeWorkerDeploymentVersionRequest(namespace=client.namespace, deployment_version=version._to_proto()))
    return {(q.name, q.type) for q in described.worker_deployment_version_info.task_queue_infos}


async def take_over(client: Client, version: WorkerDeploymentVersion, *, every: float = 2.0,
                    identity: str = "wingsmith worker") -> bool:
    """Make `version` current once it can be, unless it was active before or is being ramped by a
    person (`temporal worker deployment set-ramping-version`). True when it is current."""
    while True:
        try:
            status = await version_status(client, version)
        except RPCError as exc:
            if exc.status in _TRANSIENT:
                await asyncio.sleep(every)
                continue
            log.warning("worker version cannot read its deployment", version=version.to_canonical_string(),
                        reason=exc.message)
            return False
        if status == WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT:
            return True
        if status in (WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING,
                      WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING):
            log.info("worker version was current before, or a person ramps it; not taking over",
                     version=version.to_canonical_string())
            return False
        if status is not None:
            try:
                await client.workflow_service.set_worker_deployment_current_version(
                    SetWorkerDeploymentCurrentVersionRequest(
                        namespace=client.namespace, deployment_name=version.deployment_name,
                        build_id=version.build_id, identity=identity))
                log.info("worker version is current", version=version.to_canonical_string())
                return True
            except RPCError as exc:
                # The new version does not poll every queue of the current one yet (its other
                # workers are still starting), or another worker of it asked at the same moment.
                if exc.status not in (RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.ABORTED,
                                      RPCStatusCode.ALREADY_EXISTS, *_TRANSIENT):
                    # e.g. an API key that may not change the deployment: a person promotes it instead.
                    log.warning("worker version cannot take over; make it current with `temporal worker "
                                "deployment set-current-version`", version=version.to_canonical_string(),
                                reason=exc.message)
                    return False
                log.debug("worker version not current yet", reason=exc.message)
        await asyncio.sleep(every)

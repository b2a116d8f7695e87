"""Temporal activity: a member cluster's preflight (wingsmith/adapters/kube/preflight.py).

Sync (the kubernetes client blocks): on the kube task queue, in its thread pool. The input names where
the kubeconfig lives; the client exists only in this worker. A kubeconfig that cannot be loaded is an
answer (a failing `api_server` line), not an error: the person who asked sees why.
"""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio import activity

from contracts.cluster_check import ACTIVITY_CHECK_CLUSTER, ClusterCheckInput
from wingsmith.adapters.kube import KubeError, new_api_client
from wingsmith.domain.member_clusters import CheckLine, Preflight


@activity.defn(name=ACTIVITY_CHECK_CLUSTER)
def check_cluster(input: ClusterCheckInput) -> Preflight:
    from wingsmith.adapters.kube.preflight import run_preflight

    try:
        # A client of its own, closed after: a check may follow a fix of the kubeconfig itself.
        api = new_api_client(input.kubeconfig)
    except KubeError as err:
        activity.logger.warning("preflight of %s: kubeconfig not loadable: %s", input.cluster, err.type)
        return Preflight(checked_at=datetime.now(UTC), lines=[CheckLine(
            check="api_server", status="fail", detail=f"the kubeconfig could not be loaded: {err.message}",
            fix="fix the kubeconfig the registration names "
                "(wingsmith/adapters/kube/kubeconfig.py says what it accepts)")])
    try:
        return run_preflight(api, namespace=input.namespace, hf_token_secret=input.hf_token_secret,
                             deadline_seconds=input.check_seconds)
    finally:
        api.close()

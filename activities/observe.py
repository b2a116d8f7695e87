"""Temporal activity: one look at one cluster's deployment of a workload (kube task queue).

Reads the DGD (metadata and status) and, when asked, its frontend's `/v1/models`, and returns an
`Observation` for `wingsmith.reconcile.judge`. It changes nothing, so any number of retries or
duplicate runs are harmless. A cluster that cannot be read is an answer, not a failure: the
observation says unreachable and why, and the watch loop's grace decides what that means. Only a
bad input fails it.

Sync (the kubernetes client blocks): run it with a thread-pool `activity_executor`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
from pydantic import BaseModel, Field
from temporalio import activity

from wingsmith.kube import DgdClient, KubeconfigRef, KubeError, shared_api_client
from wingsmith.kube.dgd import frontend_url_of
from wingsmith.reconcile import FrontendCheck, Observation, read_observation

# A look is cheap and repeated every few seconds, and bounded so that it always answers well within
# the workflow's look timeout (workflows/workload.py): a few quick attempts (one flaky 500 is not a
# partition), each given 2 s to connect and 2 s to answer; a cluster that does not answer within them
# is unreachable *this time*, and the next look asks again. Worst case (a hung API) about 11 s. It
# heartbeats between attempts and before the frontend probe, so a worker lost mid-look is noticed by
# its missing heartbeat (the workflow's heartbeat timeout, a few seconds), not by the look's deadline.
_ATTEMPTS = 5
_REQUEST_TIMEOUT = (2.0, 2.0)


class ObserveInput(BaseModel):
    cluster: str = Field(min_length=1)
    kubeconfig: KubeconfigRef
    name: str = Field(min_length=1, description="the DGD")
    namespace: str = Field(min_length=1)
    served_model_name: str | None = Field(default=None, description="probe the frontend for this name; None: skip")
    probe_timeout_seconds: float = Field(default=3.0, gt=0, le=60)


ClientFactory = Callable[[KubeconfigRef], DgdClient]


def _heartbeat() -> None:
    if activity.in_activity():
        activity.heartbeat()


def _heartbeat_and_sleep(seconds: float) -> None:
    _heartbeat()
    time.sleep(seconds)


def _dgd_client(ref: KubeconfigRef) -> DgdClient:
    # The process's client for this kubeconfig, as rollouts use: a look every few seconds per workload
    # should not build a client (and its connection pool) each time.
    return DgdClient(shared_api_client(ref), owns_api=False, attempts=_ATTEMPTS, request_timeout=_REQUEST_TIMEOUT,
                     sleep=_heartbeat_and_sleep)


class ObserveActivities:
    def __init__(self, client_factory: ClientFactory = _dgd_client,
                 http: Callable[[float], httpx.Client] = lambda timeout: httpx.Client(timeout=timeout)):
        self._client_for = client_factory
        self._http = http

    @activity.defn(name="watch.observe")
    def observe(self, input: ObserveInput) -> Observation:
        at = datetime.now(UTC)
        try:
            with self._client_for(input.kubeconfig) as kube:
                obj = kube.get(input.name, input.namespace)
        except KubeError as err:
            return Observation(cluster=input.cluster, at=at, reachable=False, error=str(err))
        frontend = None
        if obj is not None and input.served_model_name is not None and not (obj.get("metadata") or {}).get(
                "deletionTimestamp"):
            _heartbeat()
            frontend = self._probe(frontend_url_of(obj), input.probe_timeout_seconds)
        return read_observation(input.cluster, at, obj, frontend)

    def _probe(self, url: str, timeout: float) -> FrontendCheck:
        try:
            with self._http(timeout) as http:
                resp = http.get(url.rstrip("/") + "/v1/models")
            if resp.status_code != 200:
                return FrontendCheck(url=url, error=f"HTTP {resp.status_code}")
            data = resp.json().get("data") or []
            return FrontendCheck(url=url, models=[m["id"] for m in data if isinstance(m, dict) and "id" in m])
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            return FrontendCheck(url=url, error=type(exc).__name__)

    def all(self) -> list[Callable]:
        return [self.observe]

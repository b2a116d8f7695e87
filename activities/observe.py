"""Temporal activity: one look at one cluster's deployment of a workload (kube task queue).

Reads the DGD (metadata and status) and, when asked, its frontend's `/v1/models`, and returns an
`Observation` for `wingsmith.reconcile.judge`. It changes nothing, so any number of retries or
duplicate runs are harmless. A cluster that cannot be read is an answer, not a failure: the
observation says unreachable and why, and the watch loop's grace decides what that means. Only a
bad input fails it.

Sync (the kubernetes client blocks): run it with a thread-pool `activity_executor`.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import httpx
from pydantic import BaseModel, Field
from temporalio import activity

from wingsmith.kube import DgdClient, KubeconfigRef, KubeError, shared_api_client
from wingsmith.kube.dgd import frontend_url_of
from wingsmith.reconcile import FrontendCheck, Observation, read_observation

# A look is cheap and repeated every few seconds: a few quick attempts (one flaky 500 is not a
# partition); a cluster whose API refuses or fails them all is unreachable *this time*, and the next
# look asks again. A slow answer is waited for (each call gets 3 s to connect, 5 s to answer): while
# the look runs, a helper thread heartbeats every 2 s, so the workflow tells a worker lost mid-look
# (no heartbeat within seconds) from a slow cluster, and never takes slowness for a lost worker.
_ATTEMPTS = 5
_REQUEST_TIMEOUT = (3.0, 5.0)
_HEARTBEAT_EVERY = 2.0


class ObserveInput(BaseModel):
    cluster: str = Field(min_length=1)
    kubeconfig: KubeconfigRef
    name: str = Field(min_length=1, description="the DGD")
    namespace: str = Field(min_length=1)
    served_model_name: str | None = Field(default=None, description="probe the frontend for this name; None: skip")
    probe_timeout_seconds: float = Field(default=3.0, gt=0, le=60)


ClientFactory = Callable[[KubeconfigRef], DgdClient]


@contextmanager
def _heartbeating(every: float = _HEARTBEAT_EVERY) -> Iterator[None]:
    """Heartbeat from a helper thread until the block ends (the SDK's heartbeat of a threaded activity
    is thread-safe; the thread runs in a copy of the activity's context to reach it)."""
    if not activity.in_activity():
        yield
        return
    stop, context = threading.Event(), contextvars.copy_context()

    def beat() -> None:
        while not stop.wait(every):
            context.run(activity.heartbeat)
    beater = threading.Thread(target=beat, name="look-heartbeat", daemon=True)
    beater.start()
    try:
        yield
    finally:
        stop.set()
        beater.join()


def _dgd_client(ref: KubeconfigRef) -> DgdClient:
    # The process's client for this kubeconfig, as rollouts use: a look every few seconds per workload
    # should not build a client (and its connection pool) each time.
    return DgdClient(shared_api_client(ref), owns_api=False, attempts=_ATTEMPTS, request_timeout=_REQUEST_TIMEOUT)


class ObserveActivities:
    def __init__(self, client_factory: ClientFactory = _dgd_client,
                 http: Callable[[float], httpx.Client] = lambda timeout: httpx.Client(timeout=timeout)):
        self._client_for = client_factory
        self._http = http

    @activity.defn(name="watch.observe")
    def observe(self, input: ObserveInput) -> Observation:
        with _heartbeating():
            return self._observe(input)

    def _observe(self, input: ObserveInput) -> Observation:
        at = datetime.now(UTC)
        try:
            with self._client_for(input.kubeconfig) as kube:
                obj = kube.get(input.name, input.namespace)
        except KubeError as err:
            return Observation(cluster=input.cluster, at=at, reachable=False, error=str(err))
        frontend = None
        if obj is not None and input.served_model_name is not None and not (obj.get("metadata") or {}).get(
                "deletionTimestamp"):
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

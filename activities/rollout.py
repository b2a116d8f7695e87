"""Temporal activities of a cluster rollout: apply the graph, wait until it serves, probe its
frontend, delete it.

Sync activities (the kubernetes client blocks): run them on a worker with a thread-pool
`activity_executor`. Each takes a kubeconfig *reference* and builds its client when it runs.
Failures that retrying cannot fix raise a non-retryable ApplicationError whose type names the
cause; everything else raises retryable errors and the activity's retry policy takes over.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import httpx
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from contracts import rollout as contract
from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.kube import DgdClient, KubeconfigRef, KubeError, shared_api_client
from wingsmith.domain.dynamo.ranks import ranks_problem
from wingsmith.domain.dynamo.readiness import (
    evaluate_readiness,
    find_pod_failure,
    pods_ready,
    ready_deadline_seconds,
    unschedulable_pods,
)
from wingsmith.domain.dynamo.render import SPEC_HASH_ANNOTATION, RenderError, render_dgd

ClientFactory = Callable[[KubeconfigRef], DgdClient]


def dgd_client_for(ref: KubeconfigRef) -> DgdClient:
    return DgdClient(shared_api_client(ref), owns_api=False)


def _app_error(err: KubeError) -> ApplicationError:
    return ApplicationError(err.message, type=err.type, non_retryable=not err.retryable)


def _pause(seconds: float) -> None:
    """Sleep between polls, waking early (and stopping) when the activity is cancelled."""
    activity.wait_for_cancelled_sync(seconds)
    if activity.is_cancelled():
        raise CancelledError("rollout activity cancelled")


def _started_at() -> float:
    """When the first attempt of this activity began, so retries share one deadline."""
    details = activity.info().heartbeat_details
    if details and isinstance(details[0], dict) and "started_at" in details[0]:
        return float(details[0]["started_at"])
    return time.time()


Polled = TypeVar("Polled")
FIRST_POLL_SECONDS = 0.02


def _poll_until(check: Callable[[int, float], tuple[Polled | None, dict[str, Any]]], *, timeout_seconds: float,
                poll_seconds: float, timed_out: Callable[[float, dict[str, Any]], ApplicationError]) -> Polled:
    """Ask `check(attempt, waited)` until it returns a value, heartbeating its progress after each
    try; past the timeout (counted from the first attempt, so retries share one deadline) raise
    what `timed_out(waited, progress)` builds. `check` raises to stop early on a final failure."""
    started = _started_at()
    attempt = 0
    while True:
        attempt += 1
        waited = time.time() - started
        done, progress = check(attempt, waited)
        if done is not None:
            return done
        activity.heartbeat({"started_at": started, "waited_seconds": round(waited, 1), **progress})
        if waited > timeout_seconds:
            raise timed_out(waited, progress)
        # Soon after an apply the answer often changes within milliseconds: ask again quickly, then
        # back off to the configured interval (as `kubectl wait` reacts at once rather than on a tick).
        _pause(min(poll_seconds, FIRST_POLL_SECONDS * 2 ** (attempt - 1)))


class RolloutActivities:
    def __init__(self, client_factory: ClientFactory = dgd_client_for,
                 http: Callable[[], AbstractContextManager[httpx.Client]] | None = None):
        self._client_for = client_factory
        # One client for every probe: a new one per probe built a TLS context each time (about a tenth
        # of the worker's CPU during journeys). httpx.Client is safe to share between threads.
        if http is None:
            shared = httpx.Client(timeout=10.0, verify=default_tls())
            http = lambda: contextlib.nullcontext(shared)  # noqa: E731
        self._http = http

    def _client(self, ref: KubeconfigRef) -> DgdClient:
        try:
            return self._client_for(ref)
        except KubeError as err:
            raise _app_error(err) from None

    @activity.defn(name=contract.ACTIVITY_APPLY)
    def apply(self, input: contract.ApplyInput) -> contract.ApplyOutput:
        # The invariant every rendered shape keeps, checked again before anything reaches the cluster: a plan
        # recorded before a check existed, or built by another path, must not become a graph that never starts.
        spec = input.spec
        for role, pool in (("worker", spec.worker), ("prefill", spec.prefill)):
            if pool is not None and (problem := ranks_problem(spec.engine, pool.args,
                                                              gpus_per_node=pool.gpus_per_node, nodes=pool.nodes)):
                raise ApplicationError(f"{role} pool of {spec.workload_id} on {spec.cluster}: {problem}",
                                       type=contract.ERROR_RANKS_MISMATCH, non_retryable=True)
        try:
            manifest = render_dgd(input.spec)
        except (RenderError, ValidationError, ValueError) as exc:
            raise ApplicationError(str(exc), type=contract.ERROR_INVALID_ROLLOUT, non_retryable=True) from None
        with self._client(input.kubeconfig) as kube:
            try:
                applied = kube.apply(manifest)
            except KubeError as err:
                raise _app_error(err) from None
        activity.logger.info("applied %s/%s generation %s", applied.namespace, applied.name,
                             applied.generation)
        return contract.ApplyOutput(**applied.model_dump(),
                                    spec_hash=manifest["metadata"]["annotations"][SPEC_HASH_ANNOTATION])

    @activity.defn(name=contract.ACTIVITY_WAIT_READY)
    def wait_ready(self, input: contract.WaitReadyInput) -> contract.WaitReadyOutput:
        deadline = input.deadline_seconds or ready_deadline_seconds(input.weight_bytes)
        where = f"{input.namespace}/{input.name}"
        unschedulable_since: dict[str, float] = {}  # pod → when this attempt first saw it find no node

        def check(kube: DgdClient, polls: int, waited: float) -> tuple[contract.WaitReadyOutput | None, dict[str, Any]]:
            nonlocal unschedulable_since
            try:
                obj = kube.get(input.name, input.namespace)
                if obj is None:
                    raise ApplicationError(f"{where} does not exist", type=contract.ERROR_DEPLOYMENT_MISSING,
                                           non_retryable=True)
                current = int(obj.get("metadata", {}).get("generation") or 0)
                if current > input.generation:
                    raise ApplicationError(
                        f"{where} moved to generation {current} while waiting for "
                        f"{input.generation}", type=contract.ERROR_DEPLOYMENT_SUPERSEDED, non_retryable=True)
                verdict = evaluate_readiness(obj, input.generation)
                pods = kube.pods(input.name, input.namespace)
                ready_pods, total_pods = pods_ready(pods)
            except KubeError as err:
                if not err.retryable:
                    raise _app_error(err) from None
                # The adapter already retried; keep polling until the deadline.
                return None, {"polls": polls, "status": f"unreadable: {err}", "pods": None}
            if verdict.ready:
                return contract.WaitReadyOutput(
                    name=input.name, namespace=input.namespace, generation=input.generation,
                    state=verdict.state or "", waited_seconds=round(waited, 3), polls=polls,
                    pods_ready=ready_pods, pods_total=total_pods), {}
            if verdict.failed:
                raise ApplicationError(
                    f"{where} failed to reconcile: {verdict.condition_message or verdict.describe()}",
                    type=contract.ERROR_DEPLOYMENT_FAILED, non_retryable=True)
            failure = find_pod_failure(pods)
            if failure is not None:
                raise ApplicationError(f"{where} will not become ready: {failure.describe()}",
                                       type=failure.type, non_retryable=True)
            now = time.monotonic()
            stuck = unschedulable_pods(pods)
            unschedulable_since = {pod: unschedulable_since.get(pod, now) for pod in stuck}
            for pod, since in sorted(unschedulable_since.items()):
                if now - since >= input.unschedulable_grace_seconds:
                    # Another deployment took the GPUs placement counted on: the workload
                    # places these replicas elsewhere rather than waiting hours for them.
                    raise ApplicationError(
                        f"{where} cannot be scheduled: pod {pod} found no node for {now - since:.0f}s: "
                        f"{stuck[pod]}", type=contract.ERROR_UNSCHEDULABLE, non_retryable=True)
            return None, {"polls": polls, "deadline_seconds": deadline, "status": verdict.describe(),
                          "pods": f"{ready_pods}/{total_pods} ready"}

        def timed_out(waited: float, progress: dict[str, Any]) -> ApplicationError:
            return ApplicationError(f"{where} not ready after {waited:.0f}s (deadline {deadline:.0f}s): "
                                    f"{progress['status']}; {progress['pods']}",
                                    type=contract.ERROR_READY_DEADLINE_EXCEEDED, non_retryable=True)

        with self._client(input.kubeconfig) as kube:
            return _poll_until(lambda polls, waited: check(kube, polls, waited), timeout_seconds=deadline,
                               poll_seconds=input.poll_seconds, timed_out=timed_out)

    @activity.defn(name=contract.ACTIVITY_PROBE_FRONTEND)
    def probe_frontend(self, input: contract.ProbeFrontendInput) -> contract.ProbeFrontendOutput:
        base = input.url
        if base is None:
            if input.kubeconfig is None or input.name is None:
                raise ApplicationError("probe_frontend needs a url, or a kubeconfig and deployment name",
                                       type=contract.ERROR_INVALID_INPUT, non_retryable=True)
            with self._client(input.kubeconfig) as kube:
                try:
                    base = kube.frontend_url(input.name, input.namespace)
                except KubeError as err:
                    raise _app_error(err) from None
        url = base.rstrip("/") + "/v1/models"

        def check(http: httpx.Client, attempts: int,
                  waited: float) -> tuple[contract.ProbeFrontendOutput | None, dict[str, Any]]:
            try:
                resp = http.get(url)
                if resp.status_code != 200:
                    return None, {"attempts": attempts, "last": f"HTTP {resp.status_code}"}
                seen = [str(m["id"]) for m in resp.json().get("data") or [] if isinstance(m, dict) and "id" in m]
            except (httpx.HTTPError, ValueError) as exc:
                return None, {"attempts": attempts, "last": type(exc).__name__}
            if input.served_model_name in seen:
                return contract.ProbeFrontendOutput(url=base, models=seen, attempts=attempts,
                                           waited_seconds=round(waited, 3)), {}
            return None, {"attempts": attempts, "last": f"serving {seen or 'no models'}"}

        def timed_out(_waited: float, progress: dict[str, Any]) -> ApplicationError:
            return ApplicationError(f"{url} did not list {input.served_model_name!r} within "
                                    f"{input.timeout_seconds:.0f}s; last answer: {progress['last']}",
                                    type=contract.ERROR_FRONTEND_NOT_SERVING, non_retryable=True)

        with self._http() as http:
            return _poll_until(lambda attempts, waited: check(http, attempts, waited),
                               timeout_seconds=input.timeout_seconds, poll_seconds=input.poll_seconds,
                               timed_out=timed_out)

    @activity.defn(name=contract.ACTIVITY_DELETE)
    def delete(self, input: contract.DeleteInput) -> contract.DeleteOutput:
        started = _started_at()
        with self._client(input.kubeconfig) as kube:
            try:
                existed = kube.delete(input.name, input.namespace)
                waited = kube.wait_gone(
                    input.name, input.namespace, timeout=input.timeout_seconds,
                    poll=input.poll_seconds,
                    tick=lambda: activity.heartbeat({"started_at": started, "deleting": input.name}))
            except KubeError as err:
                raise _app_error(err) from None
        return contract.DeleteOutput(existed=existed, waited_seconds=round(waited, 3))

    def all(self) -> list[Callable]:
        return [self.apply, self.wait_ready, self.probe_frontend, self.delete]

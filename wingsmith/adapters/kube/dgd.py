"""DynamoGraphDeployment operations against one cluster: apply, read, find failing pods, delete.

Blocking (the kubernetes client is synchronous): call from sync activities only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from kubernetes import client as k8s
from pydantic import BaseModel

from contracts.rollout import ERROR_DEPLOYMENT_MISSING
from wingsmith.adapters.kube.client import raw_json
from wingsmith.adapters.kube.errors import KubeError, with_retries
from wingsmith.domain.dynamo.names import DYNAMO_GRAPH_LABEL
from wingsmith.domain.dynamo.render import GROUP, PLURAL, VERSION

FIELD_MANAGER = "wingsmith"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
# (connect, read) seconds for every request, so a hung server costs a retry, not a hang.
REQUEST_TIMEOUT = (5, 30)


# Where a frontend URL reachable from the plane is published on the DGD: by whatever exposes it
# (an ingress controller, the gateway), or by the simulated operator.
FRONTEND_URL_ANNOTATIONS = ("wingsmith.dev/frontend-url", "sim.wingsmith.dev/frontend-url")
FRONTEND_PORT = 8000


def frontend_url_of(obj: dict[str, Any]) -> str:
    """Where an existing DGD's frontend answers: the published URL, else its frontend Service."""
    meta = obj.get("metadata") or {}
    notes = meta.get("annotations") or {}
    for key in FRONTEND_URL_ANNOTATIONS:
        if notes.get(key):
            return notes[key]
    return f"http://{meta.get('name')}-frontend.{meta.get('namespace')}.svc.cluster.local:{FRONTEND_PORT}"


class AppliedObject(BaseModel):
    name: str
    namespace: str
    uid: str
    generation: int
    resource_version: str


class DgdClient:
    def __init__(self, api: k8s.ApiClient, *, attempts: int = 6, request_timeout: tuple[float, float] = REQUEST_TIMEOUT,
                 sleep: Callable[[float], None] = time.sleep, owns_api: bool = True):
        self.api = api
        self.owns_api = owns_api  # False: a shared client (shared_api_client), which close() leaves open
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)
        self.attempts = attempts
        self.request_timeout = request_timeout  # (connect, read) seconds of each call
        self.sleep = sleep

    def close(self) -> None:
        if self.owns_api:
            self.api.close()

    def __enter__(self) -> DgdClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _retry(self, call: Callable[[], Any], doing: str) -> Any:
        return with_retries(call, doing=doing, attempts=self.attempts, sleep=self.sleep)

    def apply(self, manifest: dict[str, Any]) -> AppliedObject:
        """Server-side apply as field manager `wingsmith`; applying the same manifest twice
        leaves the object (and its generation) unchanged."""
        meta = manifest["metadata"]
        name, namespace = meta["name"], meta.get("namespace", "default")
        # Raw response: the generated client maps only 200 to a body, and an apply that creates
        # the object answers 201, which it would decode as None.
        resp = self._retry(lambda: self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, manifest, field_manager=FIELD_MANAGER,
            force=True, _content_type=APPLY_CONTENT_TYPE, _request_timeout=self.request_timeout,
            _preload_content=False), f"applying DynamoGraphDeployment {namespace}/{name}")
        obj = raw_json(resp)
        m = obj["metadata"]
        return AppliedObject(name=m["name"], namespace=m.get("namespace", namespace), uid=m["uid"],
                             generation=int(m["generation"]), resource_version=m["resourceVersion"])

    def get(self, name: str, namespace: str) -> dict[str, Any] | None:
        def call() -> dict[str, Any] | None:
            try:
                # The generated client types a custom object as `object`; the API answers a JSON object.
                return cast(dict[str, Any], self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, _request_timeout=self.request_timeout))
            except k8s.exceptions.ApiException as exc:
                if exc.status == 404:
                    return None
                raise
        return self._retry(call, f"reading DynamoGraphDeployment {namespace}/{name}")

    def by_name(self, namespace: str) -> dict[str, dict[str, Any]]:
        """Every DGD of the namespace by name: one request for what would be one GET per deployment."""
        def call() -> dict[str, dict[str, Any]]:
            resp = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, _preload_content=False, _request_timeout=self.request_timeout)
            return {obj["metadata"]["name"]: obj for obj in raw_json(resp).get("items") or []}
        return self._retry(call, f"listing DynamoGraphDeployments in {namespace}")

    def frontend_url(self, name: str, namespace: str) -> str:
        """The published frontend URL, else the in-cluster address of the frontend Service the
        operator creates for an existing DGD. No DGD, no address: that is a non-retryable
        `DeploymentMissing`, so a probe fails at once instead of polling an invented host."""
        obj = self.get(name, namespace)
        if obj is None:
            raise KubeError(ERROR_DEPLOYMENT_MISSING, f"{namespace}/{name}: deployment missing", retryable=False)
        return frontend_url_of(obj)

    def pods(self, name: str, namespace: str) -> list[dict[str, Any]]:
        """The graph's pods as API dicts (the operator labels each with the graph's name)."""
        def call() -> list[dict[str, Any]]:
            resp = self.core.list_namespaced_pod(
                namespace, label_selector=f"{DYNAMO_GRAPH_LABEL}={name}",
                _preload_content=False, _request_timeout=self.request_timeout)
            return raw_json(resp).get("items") or []
        return self._retry(call, f"listing pods of {namespace}/{name}")

    def delete(self, name: str, namespace: str) -> bool:
        """Ask for deletion; False when there was nothing to delete."""
        def call() -> bool:
            try:
                self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Foreground",
                    _request_timeout=self.request_timeout)
                return True
            except k8s.exceptions.ApiException as exc:
                if exc.status == 404:
                    return False
                raise
        return self._retry(call, f"deleting DynamoGraphDeployment {namespace}/{name}")

    def wait_gone(self, name: str, namespace: str, *, timeout: float, poll: float = 0.5,
                  tick: Callable[[], None] = lambda: None) -> float:
        """Block until the object no longer exists; returns seconds waited."""
        start = time.monotonic()
        while self.get(name, namespace) is not None:
            waited = time.monotonic() - start
            if waited > timeout:
                raise KubeError("DeleteTimeout", f"{namespace}/{name} still exists after "
                                f"{waited:.0f}s (finalizers?)", retryable=True)
            tick()
            self.sleep(poll)
        return time.monotonic() - start

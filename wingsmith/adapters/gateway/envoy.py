"""The production gateway: Envoy AI Gateway resources for an endpoint, and their reconciliation on
the gateway cluster.

Per endpoint: one `AIGatewayRoute` whose rule matches the model name (the `x-ai-eg-model` header
the AI Gateway fills from the request body) with one weighted backendRef per deployment; per
deployment one `AIServiceBackend` (OpenAI schema) pointing at one Envoy Gateway `Backend` that holds
the frontend's host and port. Names are deterministic and every object carries the managed-by
label and the endpoint's key, so the objects of an endpoint can be listed and pruned.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client as k8s

from wingsmith.adapters.gateway.client import GatewayError
from wingsmith.adapters.kube.client import KubeconfigRef, new_api_client, raw_json
from wingsmith.adapters.kube.errors import KubeError, with_retries
from wingsmith.domain.gateway.routes import Backend, BackendStatus, EndpointRoutes, RouteStatus

AI_GROUP, AI_VERSION = "aigateway.envoyproxy.io", "v1alpha1"
EG_GROUP, EG_VERSION = "gateway.envoyproxy.io", "v1alpha1"
MODEL_HEADER = "x-ai-eg-model"
MANAGED_BY = {"app.kubernetes.io/managed-by": "wingsmith"}
ENDPOINT_LABEL = "wingsmith.dev/endpoint"
MODEL_ANNOTATION = "wingsmith.dev/model-name"
BACKEND_ANNOTATION = "wingsmith.dev/backend"
FIELD_MANAGER = "wingsmith"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
REQUEST_TIMEOUT = (5, 30)

# (kind, group, version, plural), in the order objects are applied: referents before referrers.
KINDS = (
    ("Backend", EG_GROUP, EG_VERSION, "backends"),
    ("AIServiceBackend", AI_GROUP, AI_VERSION, "aiservicebackends"),
    ("AIGatewayRoute", AI_GROUP, AI_VERSION, "aigatewayroutes"),
)
_PLURALS = {kind: (group, version, plural) for kind, group, version, plural in KINDS}


# ---- names ---------------------------------------------------------------------------------------

def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")


def _digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def endpoint_key(model_name: str) -> str:
    """A DNS label for the endpoint. The hash of the exact name keeps `Kimi-K3` and `kimi-k3` apart."""
    return f"{_slug(model_name)[:40].strip('-') or 'model'}-{_digest(model_name)}"


def route_name(model_name: str) -> str:
    return f"wingsmith-{endpoint_key(model_name)}"


def backend_name(model_name: str, backend_id: str) -> str:
    base = f"{route_name(model_name)}-{_slug(backend_id)}"
    if len(base) <= 63:
        return base
    return f"{base[:54].rstrip('-')}-{_digest(backend_id)}"


# ---- rendering (pure) ----------------------------------------------------------------------------

def _meta(name: str, namespace: str, key: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {**MANAGED_BY, ENDPOINT_LABEL: key},
            "annotations": annotations}


def _endpoint(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return {"fqdn": {"hostname": host, "port": port}}
    return {"ip": {"address": host, "port": port}}


def render_envoy_resources(routes: EndpointRoutes, *, namespace: str, gateway_name: str,
                           gateway_namespace: str | None = None, request_timeout: str = "600s") -> list[dict[str, Any]]:
    """Every object of one endpoint, in apply order (Backends, AIServiceBackends, the AIGatewayRoute)."""
    model = routes.model_name
    key = endpoint_key(model)
    backends: list[dict[str, Any]] = []
    services: list[dict[str, Any]] = []
    refs: list[dict[str, Any]] = []
    for b in routes.backends:
        name = backend_name(model, b.id)
        record = json.dumps(b.model_dump(mode="json", exclude={"weight"}), sort_keys=True, separators=(",", ":"))
        backends.append({"apiVersion": f"{EG_GROUP}/{EG_VERSION}", "kind": "Backend",
                         "metadata": _meta(name, namespace, key, {BACKEND_ANNOTATION: record}),
                         "spec": {"endpoints": [_endpoint(b.url)]}})
        schema: dict[str, Any] = {"name": "OpenAI"}
        path = urlsplit(b.url).path.rstrip("/")
        if path:
            # The frontend sits under a path (an ingress prefix, the simulated clusters): its API is there.
            schema["prefix"] = f"{path}/v1"
        services.append({"apiVersion": f"{AI_GROUP}/{AI_VERSION}", "kind": "AIServiceBackend",
                         "metadata": _meta(name, namespace, key, {BACKEND_ANNOTATION: record}),
                         "spec": {"schema": schema,
                                  "backendRef": {"name": name, "kind": "Backend", "group": EG_GROUP}}})
        ref: dict[str, Any] = {"name": name, "weight": b.weight}
        if b.served_model:
            ref["modelNameOverride"] = b.served_model
        refs.append(ref)
    parent: dict[str, Any] = {"name": gateway_name, "kind": "Gateway", "group": "gateway.networking.k8s.io"}
    if gateway_namespace and gateway_namespace != namespace:
        parent["namespace"] = gateway_namespace
    route = {"apiVersion": f"{AI_GROUP}/{AI_VERSION}", "kind": "AIGatewayRoute",
             "metadata": _meta(route_name(model), namespace, key, {MODEL_ANNOTATION: model}),
             "spec": {"parentRefs": [parent], "rules": [{
                 "matches": [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model}]}],
                 "backendRefs": refs,
                 # Streams outlive the AI Gateway's 60 s default request timeout.
                 "timeouts": {"request": request_timeout}}]}}
    return [*backends, *services, route]


def routes_from_objects(route: dict[str, Any], services: list[dict[str, Any]]) -> EndpointRoutes:
    """The EndpointRoutes a rendered AIGatewayRoute and its AIServiceBackends stand for."""
    model = ((route.get("metadata") or {}).get("annotations") or {}).get(MODEL_ANNOTATION)
    if not model:
        raise GatewayError("GatewayRouteUnreadable", f"AIGatewayRoute {route['metadata'].get('name')!r} has no "
                           f"{MODEL_ANNOTATION} annotation", retryable=False)
    records = {s["metadata"]["name"]: (s["metadata"].get("annotations") or {}).get(BACKEND_ANNOTATION)
               for s in services}
    backends: list[Backend] = []
    for rule in route.get("spec", {}).get("rules") or []:
        for ref in rule.get("backendRefs") or []:
            record = records.get(ref["name"])
            if record is None:
                # A referenced AIServiceBackend is missing: the last reconcile did not finish.
                continue
            backends.append(Backend.model_validate({**json.loads(record), "weight": ref.get("weight", 1)}))
    return EndpointRoutes(model_name=model, backends=backends)


# ---- applying (blocking) -------------------------------------------------------------------------

class EnvoyGatewayClient:
    """Keeps an endpoint's Envoy AI Gateway objects on the gateway cluster equal to its routes."""

    def __init__(self, kubeconfig: KubeconfigRef, *, namespace: str, gateway_name: str,
                 gateway_namespace: str | None = None, request_timeout: str = "600s", attempts: int = 6,
                 api_client_factory: Callable[[KubeconfigRef], k8s.ApiClient] = new_api_client):
        self.namespace = namespace
        self.gateway_name = gateway_name
        self.gateway_namespace = gateway_namespace
        self.request_timeout = request_timeout
        self.attempts = attempts
        try:
            self._api = api_client_factory(kubeconfig)
        except KubeError as exc:
            raise _gateway_error(exc) from None
        self._custom = k8s.CustomObjectsApi(self._api)

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> EnvoyGatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def render(self, routes: EndpointRoutes) -> list[dict[str, Any]]:
        return render_envoy_resources(routes, namespace=self.namespace, gateway_name=self.gateway_name,
                                      gateway_namespace=self.gateway_namespace, request_timeout=self.request_timeout)

    # ---- GatewayClient ---------------------------------------------------------------------------

    def set_routes(self, routes: EndpointRoutes) -> EndpointRoutes:
        wanted = self.render(routes)
        for obj in wanted:
            self._apply(obj)
        keep = {(o["kind"], o["metadata"]["name"]) for o in wanted}
        # Prune after applying: the route no longer refers to what goes, so nothing dangles meanwhile.
        for kind in ("AIGatewayRoute", "AIServiceBackend", "Backend"):
            for obj in self._list(kind, endpoint_key(routes.model_name)):
                if (kind, obj["metadata"]["name"]) not in keep:
                    self._delete(kind, obj["metadata"]["name"])
        return routes

    def delete_routes(self, model_name: str) -> bool:
        key = endpoint_key(model_name)
        found = False
        # Route first: traffic stops before its backends disappear.
        for kind in ("AIGatewayRoute", "AIServiceBackend", "Backend"):
            names = {o["metadata"]["name"] for o in self._list(kind, key)}
            if kind == "AIGatewayRoute":
                names.add(route_name(model_name))
            for name in sorted(names):
                found = self._delete(kind, name) or found
        return found

    def get_route(self, model_name: str) -> EndpointRoutes | None:
        route = self._get("AIGatewayRoute", route_name(model_name))
        if route is None:
            return None
        return routes_from_objects(route, self._list("AIServiceBackend", endpoint_key(model_name)))

    def get_routes(self) -> list[EndpointRoutes]:
        services = self._list("AIServiceBackend", None)
        out = []
        for route in self._list("AIGatewayRoute", None):
            key = route["metadata"].get("labels", {}).get(ENDPOINT_LABEL)
            mine = [s for s in services if s["metadata"].get("labels", {}).get(ENDPOINT_LABEL) == key]
            out.append(routes_from_objects(route, mine))
        return sorted(out, key=lambda r: r.model_name)

    def status(self, model_name: str) -> RouteStatus | None:
        """Envoy reports neither per-backend health nor in-flight counts to the plane: those are None,
        and draining waits out its grace period."""
        routes = self.get_route(model_name)
        if routes is None:
            return None
        return RouteStatus(routes=routes, backends=[
            BackendStatus(id=b.id, weight=b.weight, healthy=None, in_flight=None) for b in routes.backends])

    # ---- kube calls ------------------------------------------------------------------------------

    def _retry(self, call: Callable[[], Any], doing: str) -> Any:
        try:
            return with_retries(call, doing=doing, attempts=self.attempts)
        except KubeError as exc:
            raise _gateway_error(exc) from None

    def _apply(self, obj: dict[str, Any]) -> None:
        group, version, plural = _PLURALS[obj["kind"]]
        name = obj["metadata"]["name"]
        # Raw response: the generated client decodes only 200, and an apply that creates answers 201.
        self._retry(lambda: self._custom.patch_namespaced_custom_object(
            group, version, self.namespace, plural, name, obj, field_manager=FIELD_MANAGER, force=True,
            _content_type=APPLY_CONTENT_TYPE, _request_timeout=REQUEST_TIMEOUT, _preload_content=False),
            f"applying {obj['kind']} {self.namespace}/{name}")

    def _list(self, kind: str, key: str | None) -> list[dict[str, Any]]:
        group, version, plural = _PLURALS[kind]
        selector = ",".join(f"{k}={v}" for k, v in {**MANAGED_BY, **({ENDPOINT_LABEL: key} if key else {})}.items())

        def call() -> list[dict[str, Any]]:
            resp = self._custom.list_namespaced_custom_object(
                group, version, self.namespace, plural, label_selector=selector,
                _request_timeout=REQUEST_TIMEOUT, _preload_content=False)
            return raw_json(resp).get("items") or []
        return self._retry(call, f"listing {kind} objects in {self.namespace}")

    def _get(self, kind: str, name: str) -> dict[str, Any] | None:
        group, version, plural = _PLURALS[kind]

        def call() -> dict[str, Any] | None:
            try:
                resp = self._custom.get_namespaced_custom_object(
                    group, version, self.namespace, plural, name, _request_timeout=REQUEST_TIMEOUT,
                    _preload_content=False)
            except k8s.exceptions.ApiException as exc:
                if exc.status == 404:
                    return None
                raise
            return raw_json(resp)
        return self._retry(call, f"reading {kind} {self.namespace}/{name}")

    def _delete(self, kind: str, name: str) -> bool:
        group, version, plural = _PLURALS[kind]

        def call() -> bool:
            try:
                self._custom.delete_namespaced_custom_object(
                    group, version, self.namespace, plural, name, _request_timeout=REQUEST_TIMEOUT)
                return True
            except k8s.exceptions.ApiException as exc:
                if exc.status == 404:
                    return False
                raise
        return self._retry(call, f"deleting {kind} {self.namespace}/{name}")


def _gateway_error(exc: KubeError) -> GatewayError:
    return GatewayError(exc.type, exc.message, retryable=exc.retryable, status=exc.status)

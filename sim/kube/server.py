"""The HTTP face of the simulated clusters: one Starlette app on one port for every cluster.

    /clusters/<cluster>/...                  Kubernetes API of that cluster (kubeconfig server URL)
    /frontends/<cluster>/<namespace>/<dgd>/  simulated OpenAI-compatible frontend of one DGD
    /admin/clusters                          clusters, their URLs and faults
    /admin/clusters/<cluster>/faults         GET, PATCH (set some), PUT (reset then set), DELETE (reset)
    /admin/clusters/<cluster>/setup          GET, PATCH: the Dynamo CRDs served and the user's Role (setup.py)
    /admin/clusters/<cluster>/load           GET, PATCH, PUT, DELETE: load profiles of the simulated engines

Kubernetes and admin routes need the cluster's bearer token; frontends, like a model server behind
a cluster's ingress, take no credentials. Every Kubernetes request is also authorized against the
Role the cluster's setup gives its user (access.py): 403 Forbidden as a real server answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sim.kube import errors, frontend, verbs
from sim.kube.access import access_review, allowed, forbidden
from sim.kube.resources import ResourceType
from sim.kube.setup import version_priority
from sim.kube.verbs import NOT_FOUND

if TYPE_CHECKING:
    from sim.kube.clusters import SimulatedCluster
    from sim.kube.frontend import Frontends

VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.0-wingsmith-sim", "platform": "linux/amd64",
           "goVersion": "go1.24", "compiler": "gc", "gitCommit": "0" * 40, "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z"}
_VERBS = ["create", "delete", "get", "list", "patch", "update"]
_WRITES = ("POST", "PUT", "PATCH", "DELETE")


def _status_response(error: errors.KubeError) -> JSONResponse:
    return JSONResponse(error.status(), status_code=error.code)


def _unreachable(cluster: str) -> Response:
    """What a client sees of a partitioned cluster through a load balancer: 503, nothing else."""
    return Response(f"upstream connect error: cluster {cluster} is unreachable (simulated partition)\n",
                    status_code=503, media_type="text/plain")


def _authorized(cluster: SimulatedCluster, request: Request) -> bool:
    header = request.headers.get("authorization", "")
    return header == f"Bearer {cluster.token}"


def build_app(clusters: dict[str, SimulatedCluster], frontends: Frontends) -> Starlette:
    routes = _Routes(clusters, frontends)
    return Starlette(routes=[
        Route("/clusters/{cluster}/{path:path}", routes.kube, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/frontends/{cluster}/{namespace}/{name}/{path:path}", routes.front, methods=["GET", "POST"]),
        Route("/admin/clusters", routes.admin_list, methods=["GET"]),
        Route("/admin/clusters/{cluster}/faults", routes.admin_faults, methods=["GET", "PUT", "PATCH", "DELETE"]),
        Route("/admin/clusters/{cluster}/setup", routes.admin_setup, methods=["GET", "PATCH"]),
        Route("/admin/clusters/{cluster}/load", routes.admin_load, methods=["GET", "PUT", "PATCH", "DELETE"]),
    ])


class _Routes:
    """The app's handlers, over the clusters it serves."""

    def __init__(self, clusters: dict[str, SimulatedCluster], frontends: Frontends):
        self.clusters, self.frontends = clusters, frontends

    async def kube(self, request: Request) -> Response:
        cluster = self.clusters.get(request.path_params["cluster"])
        if cluster is None:
            unknown = request.path_params["cluster"]
            return _status_response(errors.KubeError(404, "NotFound", f"no simulated cluster {unknown!r}"))
        if not _authorized(cluster, request):
            return _status_response(errors.unauthorized())
        if (injected := await _injected_fault(cluster, request)) is not None:
            return injected
        try:
            return await _dispatch(cluster, request)
        except errors.KubeError as exc:
            return _status_response(exc)
        except Exception as exc:  # the emulator's own bug: answer like a server would, keep serving
            return _status_response(errors.internal(f"{type(exc).__name__}: {exc}"))

    async def front(self, request: Request) -> Response:
        cluster = self.clusters.get(request.path_params["cluster"])
        if cluster is not None and cluster.faults.unreachable:
            return _unreachable(cluster.name)
        faults = cluster.faults if cluster is not None else None
        return await frontend.handle(self.frontends, request, faults)

    async def admin_list(self, request: Request) -> Response:
        return JSONResponse({name: c.describe() for name, c in self.clusters.items()})

    def _admin_cluster(self, request: Request) -> SimulatedCluster | Response:
        """The cluster an admin request names, or the answer when it is unknown or the token is wrong."""
        cluster = self.clusters.get(request.path_params["cluster"])
        if cluster is None:
            return JSONResponse({"error": f"no simulated cluster {request.path_params['cluster']!r}"}, status_code=404)
        if not _authorized(cluster, request):
            return JSONResponse({"error": "missing or wrong bearer token for this cluster"}, status_code=401)
        return cluster

    async def admin_faults(self, request: Request) -> Response:
        cluster = self._admin_cluster(request)
        if isinstance(cluster, Response):
            return cluster
        try:
            if request.method == "DELETE":
                cluster.faults.reset()
            elif request.method in ("PUT", "PATCH"):
                changes = json.loads(await request.body() or b"{}")
                if not isinstance(changes, dict):
                    return JSONResponse({"error": "body must be a JSON object of fault settings"}, status_code=400)
                if request.method == "PUT":
                    cluster.faults.reset()
                cluster.faults.update(changes)
        except (json.JSONDecodeError, ValidationError) as exc:
            return JSONResponse({"error": f"bad fault settings: {exc}"}, status_code=422)
        return JSONResponse(cluster.faults.model_dump())

    async def admin_setup(self, request: Request) -> Response:
        cluster = self._admin_cluster(request)
        if isinstance(cluster, Response):
            return cluster
        if request.method == "PATCH":
            try:
                changes = json.loads(await request.body() or b"{}")
                if not isinstance(changes, dict):
                    return JSONResponse({"error": "body must be a JSON object of setup fields"}, status_code=400)
                merged = type(cluster.setup).model_validate({**cluster.setup.model_dump(by_alias=True), **changes})
            except (json.JSONDecodeError, ValidationError) as exc:
                return JSONResponse({"error": f"bad setup: {exc}"}, status_code=422)
            for name in changes:
                setattr(cluster.setup, name, getattr(merged, name))
        return JSONResponse(cluster.setup.model_dump(by_alias=True))


    async def admin_load(self, request: Request) -> Response:
        """The cluster's load profiles (`LoadSettings`): PATCH sets the fields given, PUT replaces them
        all, DELETE resets; a bad profile is refused whole (422), the settings stay as they were."""
        cluster = self._admin_cluster(request)
        if isinstance(cluster, Response):
            return cluster
        if request.method != "GET":
            try:
                changes = json.loads(await request.body() or b"{}") if request.method != "DELETE" else {}
                if not isinstance(changes, dict):
                    return JSONResponse({"error": "body must be a JSON object of load settings"}, status_code=400)
                base = cluster.load.model_dump() if request.method == "PATCH" else {}
                merged = type(cluster.load).model_validate({**base, **changes})
            except (json.JSONDecodeError, ValidationError) as exc:
                return JSONResponse({"error": f"bad load settings: {exc}"}, status_code=422)
            for name in type(cluster.load).model_fields:
                setattr(cluster.load, name, getattr(merged, name))
        return JSONResponse(cluster.load.model_dump())


async def _injected_fault(cluster: SimulatedCluster, request: Request) -> Response | None:
    """The answer a fault injected on the cluster gives instead of the API (after its latency), if any."""
    faults = cluster.faults
    if faults.unreachable:
        return _unreachable(cluster.name)
    if faults.latency:
        await asyncio.sleep(faults.latency)
    if faults.draw(faults.api_error_rate, "api_error"):
        return _status_response(errors.internal("injected fault: the API server could not answer"))
    if request.method in _WRITES and faults.draw(faults.conflict_rate, "conflict"):
        return _status_response(errors.KubeError(
            409, "Conflict", "Operation cannot be fulfilled: injected conflict; please retry"))
    return None


# ---- Kubernetes API dispatch -------------------------------------------------------------------


async def _dispatch(cluster: SimulatedCluster, request: Request) -> Response:
    parts = [p for p in request.path_params["path"].split("/") if p]
    where = _api_path(cluster, parts)
    if isinstance(where, Response):
        return where
    group, version, rest = where
    if not rest:
        return JSONResponse(_resource_list(cluster, group, version))
    special = _GROUPS.get(group)
    if special is not None and (answer := await special(cluster, request, version, rest)) is not None:
        return answer
    target = verbs.target_of(cluster, request, group, version, rest)
    verbs.authorize(cluster, request, target)
    handler = verbs.HANDLERS.get(request.method)
    if handler is None:
        raise errors.method_not_allowed()
    return await handler(cluster, request, target)


def _api_path(cluster: SimulatedCluster, parts: list[str]) -> tuple[str, str, list[str]] | Response:
    """The group, version and rest of a path under /api or /apis, or the discovery answer for the path."""
    if parts in ([], ["version"]):
        return JSONResponse(VERSION)
    if parts[0] == "api":
        if len(parts) == 1:
            return JSONResponse({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        return "", parts[1], parts[2:]
    if parts[0] == "apis":
        if len(parts) <= 2:
            return JSONResponse(_group_list(cluster, parts[1] if len(parts) == 2 else None))
        return parts[1], parts[2], parts[3:]
    raise errors.KubeError(404, "NotFound", NOT_FOUND)


async def _access_review(cluster: SimulatedCluster, request: Request, version: str, rest: list[str]) -> Response | None:
    """`SelfSubjectAccessReview`, answered from the Role the cluster's setup gives its user."""
    if version != "v1" or rest != ["selfsubjectaccessreviews"]:
        return None
    if request.method != "POST":
        raise errors.method_not_allowed()
    content_type = request.headers.get("content-type", "application/json")
    if "json" not in content_type:  # kubectl's typed clients send protobuf, which the emulator does not speak
        raise errors.unsupported_media(content_type)
    return JSONResponse(access_review(cluster.setup.role, verbs.json_body(await request.body()), cluster.user), 201)


async def _crds(cluster: SimulatedCluster, request: Request, version: str, rest: list[str]) -> Response:
    """CRDs are served read-only from the files they were loaded from."""
    if rest[0] != "customresourcedefinitions":
        raise errors.KubeError(404, "NotFound", NOT_FOUND)
    if request.method != "GET":
        raise errors.method_not_allowed("the emulator's CRDs come from files and are read-only")
    name = rest[1] if len(rest) > 1 else None
    verb = "get" if name else "list"
    if not allowed(cluster.setup.role, verb, "apiextensions.k8s.io", "customresourcedefinitions", name):
        raise forbidden(verb, "apiextensions.k8s.io", "customresourcedefinitions", None, name, cluster.user)
    served = [c for c in (_as_installed(cluster, crd) for crd in cluster.crds.values()) if c is not None]
    if name is None:
        return JSONResponse({"kind": "CustomResourceDefinitionList", "apiVersion": "apiextensions.k8s.io/v1",
                             "metadata": {"resourceVersion": "1"}, "items": served})
    crd = next((c for c in served if c["metadata"]["name"] == name), None)
    if crd is None:
        raise errors.not_found("customresourcedefinitions.apiextensions.k8s.io", name)
    return JSONResponse(crd)


# API groups the emulator answers itself rather than from its store (None: not this path, go on).
_GROUPS: dict[str, Callable[[SimulatedCluster, Request, str, list[str]], Awaitable[Response | None]]] = {
    "authorization.k8s.io": _access_review, "apiextensions.k8s.io": _crds}


def _group_list(cluster: SimulatedCluster, only: str | None) -> dict[str, Any]:
    groups: dict[str, set[str]] = {"apiextensions.k8s.io": {"v1"}, "authorization.k8s.io": {"v1"}}
    for rt in cluster.store.types:
        if rt.group:
            served = {v for v in rt.versions if cluster.setup.serves(rt.group, v, rt.versions)}
            if served:
                groups.setdefault(rt.group, set()).update(served)
    entries = []
    for group, versions in sorted(groups.items()):
        ordered = sorted(versions, key=version_priority, reverse=True)
        entries.append({"name": group, "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered],
                        "preferredVersion": {"groupVersion": f"{group}/{ordered[0]}", "version": ordered[0]}})
    if only is not None:
        match = [e for e in entries if e["name"] == only]
        if not match:
            raise errors.KubeError(404, "NotFound", NOT_FOUND)
        return {"kind": "APIGroup", "apiVersion": "v1", **match[0]}
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": entries}


def _resource_list(cluster: SimulatedCluster, group: str, version: str) -> dict[str, Any]:
    types: list[ResourceType] = [rt for rt in cluster.store.types if rt.group == group and version in rt.versions
                                 and cluster.setup.serves(group, version, rt.versions)]
    if group == "apiextensions.k8s.io" and version == "v1":
        from sim.kube.resources import CRD_TYPE
        types = [CRD_TYPE]
    if group == "authorization.k8s.io" and version == "v1":
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "authorization.k8s.io/v1",
                "resources": [{"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview",
                               "namespaced": False, "kind": "SelfSubjectAccessReview", "verbs": ["create"]}]}
    if not types:
        raise errors.KubeError(404, "NotFound", NOT_FOUND)
    resources = []
    for rt in types:
        resources.append({"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                          "kind": rt.kind, "verbs": _VERBS, "shortNames": list(rt.short_names)})
        if rt.status_subresource:
            resources.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                              "kind": rt.kind, "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def _as_installed(cluster: SimulatedCluster, crd: dict[str, Any]) -> dict[str, Any] | None:
    """A CRD as the cluster's setup installs it: absent, or with only the versions it serves (the
    oldest of them then the storage version)."""
    spec = crd["spec"]
    names = tuple(v["name"] for v in spec["versions"])
    versions = [v for v in spec["versions"] if cluster.setup.serves(spec["group"], v["name"], names)]
    if not versions:
        return None
    if len(versions) == len(spec["versions"]):
        return crd
    kept = [{**v, "storage": i == 0} for i, v in enumerate(sorted(versions, key=lambda v: version_priority(v["name"])))]
    return {**crd, "spec": {**spec, "versions": kept}}


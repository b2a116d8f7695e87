"""The HTTP face of the simulated clusters: one Starlette app on one port for every cluster.

    /clusters/<cluster>/...                  Kubernetes API of that cluster (kubeconfig server URL)
    /frontends/<cluster>/<namespace>/<dgd>/  simulated OpenAI-compatible frontend of one DGD
    /admin/clusters                          clusters, their URLs and faults
    /admin/clusters/<cluster>/faults         GET, PATCH (set some), PUT (reset then set), DELETE (reset)
    /admin/clusters/<cluster>/setup          GET, PATCH: the Dynamo CRDs served and the user's Role (setup.py)

Kubernetes and admin routes need the cluster's bearer token; frontends, like a model server behind
a cluster's ingress, take no credentials. Every Kubernetes request is also authorized against the
Role the cluster's setup gives its user (access.py): 403 Forbidden as a real server answers.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sim.kube import errors, frontend
from sim.kube.access import access_review, allowed, forbidden, verb_of
from sim.kube.resources import ResourceType
from sim.kube.setup import version_priority
from sim.kube.store import APPLY, WriteOptions

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
    async def kube(request: Request) -> Response:
        cluster = clusters.get(request.path_params["cluster"])
        if cluster is None:
            unknown = request.path_params["cluster"]
            return _status_response(errors.KubeError(404, "NotFound", f"no simulated cluster {unknown!r}"))
        if not _authorized(cluster, request):
            return _status_response(errors.unauthorized())
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
        try:
            return await _dispatch(cluster, request)
        except errors.KubeError as exc:
            return _status_response(exc)
        except Exception as exc:  # the emulator's own bug: answer like a server would, keep serving
            return _status_response(errors.internal(f"{type(exc).__name__}: {exc}"))

    async def front(request: Request) -> Response:
        cluster = clusters.get(request.path_params["cluster"])
        if cluster is not None and cluster.faults.unreachable:
            return _unreachable(cluster.name)
        faults = cluster.faults if cluster is not None else None
        return await frontend.handle(frontends, request, faults)

    async def admin_list(request: Request) -> Response:
        return JSONResponse({name: c.describe() for name, c in clusters.items()})

    async def admin_faults(request: Request) -> Response:
        cluster = clusters.get(request.path_params["cluster"])
        if cluster is None:
            return JSONResponse({"error": f"no simulated cluster {request.path_params['cluster']!r}"}, status_code=404)
        if not _authorized(cluster, request):
            return JSONResponse({"error": "missing or wrong bearer token for this cluster"}, status_code=401)
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

    async def admin_setup(request: Request) -> Response:
        cluster = clusters.get(request.path_params["cluster"])
        if cluster is None:
            return JSONResponse({"error": f"no simulated cluster {request.path_params['cluster']!r}"}, status_code=404)
        if not _authorized(cluster, request):
            return JSONResponse({"error": "missing or wrong bearer token for this cluster"}, status_code=401)
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

    return Starlette(routes=[
        Route("/clusters/{cluster}/{path:path}", kube, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/frontends/{cluster}/{namespace}/{name}/{path:path}", front, methods=["GET", "POST"]),
        Route("/admin/clusters", admin_list, methods=["GET"]),
        Route("/admin/clusters/{cluster}/faults", admin_faults, methods=["GET", "PUT", "PATCH", "DELETE"]),
        Route("/admin/clusters/{cluster}/setup", admin_setup, methods=["GET", "PATCH"]),
    ])


# ---- Kubernetes API dispatch -------------------------------------------------------------------

async def _dispatch(cluster: SimulatedCluster, request: Request) -> Response:
    parts = [p for p in request.path_params["path"].split("/") if p]
    if parts in ([], ["version"]):
        return JSONResponse(VERSION)
    if parts[0] == "api":
        if len(parts) == 1:
            return JSONResponse({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis":
        if len(parts) <= 2:
            return JSONResponse(_group_list(cluster, parts[1] if len(parts) == 2 else None))
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise errors.KubeError(404, "NotFound", "the server could not find the requested resource")
    if not rest:
        return JSONResponse(_resource_list(cluster, group, version))
    if group == "authorization.k8s.io" and version == "v1" and rest == ["selfsubjectaccessreviews"]:
        if request.method != "POST":
            raise errors.method_not_allowed()
        content_type = request.headers.get("content-type", "application/json")
        if "json" not in content_type:  # kubectl's typed clients send protobuf, which the emulator does not speak
            raise errors.unsupported_media(content_type)
        return JSONResponse(access_review(cluster.setup.role, _json(await request.body()), cluster.user), 201)
    if group == "apiextensions.k8s.io":
        return _crds(cluster, request, rest)

    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    plural, name, sub = rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)
    store = cluster.store
    rt = store.resource(group, version, plural)
    if not cluster.setup.serves(group, version, rt.versions):  # its CRD is not installed (at this version)
        raise errors.KubeError(404, "NotFound", "the server could not find the requested resource")
    if rt.namespaced != (namespace is not None) and not (name is None and request.method == "GET"):
        raise errors.KubeError(404, "NotFound", "the server could not find the requested resource")
    if sub and (sub != "status" or not rt.status_subresource):
        raise errors.KubeError(404, "NotFound", f"the server could not find the requested resource ({plural}/{sub})")

    query = request.query_params
    verb = verb_of(request.method, name, dict(query))
    if not allowed(cluster.setup.role, verb, group, f"{plural}/{sub}" if sub else plural, name):
        raise forbidden(verb, group, f"{plural}/{sub}" if sub else plural, namespace, name, cluster.user)
    if query.get("watch") in ("true", "1"):
        raise errors.method_not_allowed("watch is not supported by the emulator; poll with list instead")
    method = request.method
    if method == "GET":
        only_metadata = "as=PartialObjectMetadata" in request.headers.get("accept", "")
        if name:
            obj = store.get(rt, version, namespace, name)
            return JSONResponse(_metadata_only(obj) if only_metadata else obj)
        listed = store.list(rt, version, namespace, query.get("labelSelector"), query.get("fieldSelector"),
                            to_encode=True)
        if only_metadata:
            listed = {**listed, "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                      "items": [_metadata_only(item) for item in listed["items"]]}
        return JSONResponse(listed)

    opts = WriteOptions(
        manager=query.get("fieldManager") or request.headers.get("user-agent", "unknown").split("/")[0] or "unknown",
        dry_run="All" in query.getlist("dryRun"),
        field_validation=query.get("fieldValidation"),
        force=query.get("force") in ("true", "1"),
    )
    raw = await request.body()
    content_type = request.headers.get("content-type", "application/json")
    if method == "DELETE":
        if not name:
            raise errors.method_not_allowed("deletecollection is not supported by the emulator")
        body = _json(raw) if raw else {}
        return JSONResponse(store.delete(rt, version, namespace, name, (body or {}).get("preconditions")))
    if method == "POST":
        if name:
            raise errors.method_not_allowed()
        return _written(store.create(rt, version, namespace, _json(raw), opts), opts, 201)
    if not name:
        raise errors.method_not_allowed()
    if method == "PUT":
        return _written(store.replace(rt, version, namespace, name, _json(raw), opts, subresource=sub), opts)
    if content_type.split(";")[0].strip().lower() == APPLY:
        if not query.get("fieldManager"):
            raise errors.bad_request("PATCH, application/apply-patch+yaml requires fieldManager parameter")
        existed = store.exists(rt, namespace, name)
        if not existed and not allowed(cluster.setup.role, "create", group, plural, name):
            # An apply that creates the object needs `create` as well as `patch`, as on a real server.
            raise forbidden("create", group, plural, namespace, name, cluster.user)
        body = raw.decode() if raw else ""
        return _written(store.patch(rt, version, namespace, name, body, content_type, opts, subresource=sub),
                        opts, 200 if existed else 201)
    return _written(store.patch(rt, version, namespace, name, _json(raw), content_type, opts, subresource=sub), opts)


def _metadata_only(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as `PartialObjectMetadata` (`Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`):
    its metadata alone, so a client can learn that a Secret exists without reading its value."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None


def _written(obj: dict[str, Any], opts: WriteOptions, code: int = 200) -> JSONResponse:
    headers = {"Warning": ", ".join(f'299 - "{w}"' for w in opts.warnings)} if opts.warnings else None
    return JSONResponse(obj, status_code=code, headers=headers)


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
            raise errors.KubeError(404, "NotFound", "the server could not find the requested resource")
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
        raise errors.KubeError(404, "NotFound", "the server could not find the requested resource")
    resources = []
    for rt in types:
        resources.append({"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                          "kind": rt.kind, "verbs": _VERBS, "shortNames": list(rt.short_names)})
        if rt.status_subresource:
            resources.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                              "kind": rt.kind, "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def _crds(cluster: SimulatedCluster, request: Request, rest: list[str]) -> Response:
    """CRDs are served read-only from the files they were loaded from."""
    if rest[0] != "customresourcedefinitions":
        raise errors.KubeError(404, "NotFound", "the server could not find the requested resource")
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


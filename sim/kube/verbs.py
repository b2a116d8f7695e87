"""The Kubernetes API's resource requests, one handler per verb: the object or collection a path
names, the RBAC check of the request, and read, create, replace, patch (server-side apply too) and
delete against the cluster's store."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sim.kube import errors
from sim.kube.access import allowed, forbidden, verb_of
from sim.kube.resources import ResourceType
from sim.kube.store import APPLY, WriteOptions

if TYPE_CHECKING:
    from sim.kube.clusters import SimulatedCluster

NOT_FOUND = "the server could not find the requested resource"


@dataclass(frozen=True)
class Target:
    """The object (or collection) a resource request names."""
    group: str
    version: str
    rt: ResourceType
    namespace: str | None
    plural: str
    name: str | None
    sub: str | None

    @property
    def resource(self) -> str:
        return f"{self.plural}/{self.sub}" if self.sub else self.plural


def target_of(cluster: SimulatedCluster, request: Request, group: str, version: str, rest: list[str]) -> Target:
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    plural, name, sub = rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)
    rt = cluster.store.resource(group, version, plural)
    if not cluster.setup.serves(group, version, rt.versions):  # its CRD is not installed (at this version)
        raise errors.KubeError(404, "NotFound", NOT_FOUND)
    if rt.namespaced != (namespace is not None) and not (name is None and request.method == "GET"):
        raise errors.KubeError(404, "NotFound", NOT_FOUND)
    if sub and (sub != "status" or not rt.status_subresource):
        raise errors.KubeError(404, "NotFound", f"{NOT_FOUND} ({plural}/{sub})")
    return Target(group, version, rt, namespace, plural, name, sub)


def authorize(cluster: SimulatedCluster, request: Request, target: Target) -> None:
    query = request.query_params
    verb = verb_of(request.method, target.name, dict(query))
    if not allowed(cluster.setup.role, verb, target.group, target.resource, target.name):
        raise forbidden(verb, target.group, target.resource, target.namespace, target.name, cluster.user)
    if query.get("watch") in ("true", "1"):
        raise errors.method_not_allowed("watch is not supported by the emulator; poll with list instead")


async def _read(cluster: SimulatedCluster, request: Request, t: Target) -> Response:
    query = request.query_params
    only_metadata = "as=PartialObjectMetadata" in request.headers.get("accept", "")
    if t.name:
        obj = cluster.store.get(t.rt, t.version, t.namespace, t.name)
        return JSONResponse(_metadata_only(obj) if only_metadata else obj)
    listed = cluster.store.list(t.rt, t.version, t.namespace, query.get("labelSelector"),
                                query.get("fieldSelector"), to_encode=True)
    if only_metadata:
        listed = {**listed, "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                  "items": [_metadata_only(item) for item in listed["items"]]}
    return JSONResponse(listed)


def _write_options(request: Request) -> WriteOptions:
    query = request.query_params
    return WriteOptions(
        manager=query.get("fieldManager") or request.headers.get("user-agent", "unknown").split("/")[0] or "unknown",
        dry_run="All" in query.getlist("dryRun"),
        field_validation=query.get("fieldValidation"),
        force=query.get("force") in ("true", "1"),
    )


async def _delete(cluster: SimulatedCluster, request: Request, t: Target) -> Response:
    if not t.name:
        raise errors.method_not_allowed("deletecollection is not supported by the emulator")
    raw = await request.body()
    body = json_body(raw) if raw else {}
    return JSONResponse(cluster.store.delete(t.rt, t.version, t.namespace, t.name, (body or {}).get("preconditions")))


async def _create(cluster: SimulatedCluster, request: Request, t: Target) -> Response:
    if t.name:
        raise errors.method_not_allowed()
    opts = _write_options(request)
    body = json_body(await request.body())
    return _written(cluster.store.create(t.rt, t.version, t.namespace, body, opts), opts, 201)


async def _replace(cluster: SimulatedCluster, request: Request, t: Target) -> Response:
    if not t.name:
        raise errors.method_not_allowed()
    opts = _write_options(request)
    body = json_body(await request.body())
    return _written(cluster.store.replace(t.rt, t.version, t.namespace, t.name, body, opts, subresource=t.sub), opts)


async def _patch(cluster: SimulatedCluster, request: Request, t: Target) -> Response:
    if not t.name:
        raise errors.method_not_allowed()
    content_type = request.headers.get("content-type", "application/json")
    if content_type.split(";")[0].strip().lower() == APPLY:
        return await _apply(cluster, request, t, t.name, content_type)
    opts = _write_options(request)
    body = json_body(await request.body())
    return _written(cluster.store.patch(t.rt, t.version, t.namespace, t.name, body, content_type, opts,
                                        subresource=t.sub), opts)


async def _apply(cluster: SimulatedCluster, request: Request, t: Target, name: str, content_type: str) -> Response:
    """Server-side apply: a patch that creates the object when it does not exist yet."""
    if not request.query_params.get("fieldManager"):
        raise errors.bad_request("PATCH, application/apply-patch+yaml requires fieldManager parameter")
    existed = cluster.store.exists(t.rt, t.namespace, name)
    if not existed and not allowed(cluster.setup.role, "create", t.group, t.plural, name):
        # An apply that creates the object needs `create` as well as `patch`, as on a real server.
        raise forbidden("create", t.group, t.plural, t.namespace, name, cluster.user)
    opts = _write_options(request)
    raw = await request.body()
    body = raw.decode() if raw else ""
    return _written(cluster.store.patch(t.rt, t.version, t.namespace, name, body, content_type, opts,
                                        subresource=t.sub), opts, 200 if existed else 201)


HANDLERS: dict[str, Callable[[SimulatedCluster, Request, Target], Awaitable[Response]]] = {
    "GET": _read, "DELETE": _delete, "POST": _create, "PUT": _replace, "PATCH": _patch}


def _metadata_only(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as `PartialObjectMetadata` (`Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`):
    its metadata alone, so a client can learn that a Secret exists without reading its value."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def json_body(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None


def _written(obj: dict[str, Any], opts: WriteOptions, code: int = 200) -> JSONResponse:
    headers = {"Warning": ", ".join(f'299 - "{w}"' for w in opts.warnings)} if opts.warnings else None
    return JSONResponse(obj, status_code=code, headers=headers)

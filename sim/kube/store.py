"""One cluster's object store with the API server's write semantics: uid, creationTimestamp,
resourceVersion (409 when a write carries a stale one), metadata.generation (bumped only when the
body outside metadata and status changes), the status subresource, finalizers, schema validation of
custom objects, merge/JSON patch and server-side apply with field managers.

No HTTP here: the HTTP layer and the simulated operator both call these methods. Objects are kept
in their storage version. A DynamoGraphDeployment is converted between v1alpha1 and v1beta1 as the
operator's conversion webhook does (`sim.kube.conversion`): a write through v1alpha1 is validated in
v1alpha1, then stored as v1beta1; a read through v1alpha1 answers in v1alpha1's shape. Other kinds
have one shape per group, and reading through another version only rewrites `apiVersion`.

A cluster outlives whoever started it, as a real one outlives its control plane: `StoreFile` keeps
one store in one JSON file (objects, field managers, the resourceVersion counter), written
atomically whenever something changed and loaded when the emulator starts again on the same home.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import secrets
import threading
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from sim.kube import conversion, errors
from sim.kube.patches import (
    ApplyConflict,
    ListKeys,
    Managers,
    apply,
    builtin_list_keys,
    fields_v1,
    json_patch,
    merge_patch,
    record_update,
    schema_list_keys,
)
from sim.kube.resources import ResourceType
from sim.kube.schema import drop_nulls
from sim.kube.selectors import field_selector, label_selector

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SERVER_METADATA = ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp",
                    "managedFields", "namespace", "name")
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
# Kinds whose versions differ in shape: (group, plural) -> convert(object, group, version).
_CONVERSIONS = {("nvidia.com", "dynamographdeployments"): conversion.convert}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Entry:
    obj: dict[str, Any]
    managers: Managers = field(default_factory=dict)
    manager_meta: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # -> (apiVersion, time)


@dataclass
class WriteOptions:
    manager: str = "unknown"
    dry_run: bool = False
    field_validation: str | None = None  # Strict | Warn | Ignore; None means the store default
    force: bool = False
    warnings: list[str] = field(default_factory=list)


class ClusterStore:
    def __init__(self, types: list[ResourceType], *, strict_by_default: bool = True):
        self._types = {(t.group, t.plural): t for t in types}
        self._objects: dict[tuple[str, str], dict[tuple[str, str], _Entry]] = {k: {} for k in self._types}
        self._rv = 0
        self._lock = threading.RLock()
        self.strict_by_default = strict_by_default

    # ---- types ---------------------------------------------------------------------------------

    @property
    def types(self) -> list[ResourceType]:
        return list(self._types.values())

    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self._types.get((group, plural))
        if rt is None or version not in rt.versions:
            where = f"{group}/{version}" if group else version
            raise errors.KubeError(404, "NotFound",
                                   f"the server could not find the requested resource ({where} {plural})")
        return rt

    def type_of(self, group: str, plural: str) -> ResourceType:
        return self._types[(group, plural)]

    # ---- reads ---------------------------------------------------------------------------------

    def get(self, rt: ResourceType, version: str, namespace: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            return self._served(rt, version, self._entry(rt, namespace, name).obj)

    def list(self, rt: ResourceType, version: str, namespace: str | None = None,
             labels: str | None = None, fields: str | None = None, *, to_encode: bool = False) -> dict[str, Any]:
        """`to_encode`: the answer is only encoded (the API's JSON), never changed, so each item is a shallow
        copy sharing the stored object's insides (writes replace stored objects, never change them in place):
        deep copies of thousands of objects per LIST held the clusters' event loop for seconds, and the
        frontends it also serves answered probes too late."""
        match_labels, match_fields = label_selector(labels), field_selector(fields)
        served = self._shallow if to_encode else self._served
        with self._lock:
            stored = sorted(self._objects[(rt.group, rt.plural)].items())
            items = [served(rt, version, e.obj) for (ns, _), e in stored
                     if (namespace is None or ns == namespace) and match_labels(e.obj) and match_fields(e.obj)]
            return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version(version),
                    "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def stored(self, rt: ResourceType) -> Sequence[dict[str, Any]]:
        """Every object of a type as stored, sorted as `list` sorts them, without the copies `list`
        makes (and with the `apiVersion` each was written in). For a reader that changes nothing it
        gets: writes replace stored objects and never change one in place, so what this returns
        stays as it was read."""
        with self._lock:
            return [entry.obj for _, entry in sorted(self._objects[(rt.group, rt.plural)].items())]

    def held(self) -> AbstractContextManager[bool]:
        """Hold the store still for several calls: other threads wait until the block ends, this
        one reads and writes on (the lock is re-entrant)."""
        return self._lock

    def exists(self, rt: ResourceType, namespace: str | None, name: str) -> bool:
        with self._lock:
            return (namespace or "", name) in self._objects[(rt.group, rt.plural)]

    # ---- writes --------------------------------------------------------------------------------

    def create(self, rt: ResourceType, version: str, namespace: str | None, body: dict[str, Any],
               opts: WriteOptions | None = None) -> dict[str, Any]:
        opts = opts or WriteOptions()
        body = self._body(body)
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta.get("name") or ""
        self._check_target(rt, namespace, name, body)
        with self._lock:
            if (namespace or "", name) in self._objects[(rt.group, rt.plural)]:
                raise errors.already_exists(rt.qualified, name)
            managers = record_update(None, body, {}, opts.manager, _list_keys(rt, version))
            return self._commit(rt, version, namespace, name, None, body, managers, opts, ("Update", opts.manager))

    def replace(self, rt: ResourceType, version: str, namespace: str | None, name: str, body: dict[str, Any],
                opts: WriteOptions | None = None, *, subresource: str | None = None) -> dict[str, Any]:
        opts = opts or WriteOptions()
        body = self._body(body)
        self._check_target(rt, namespace, name, body)
        with self._lock:
            entry = self._entry(rt, namespace, name)
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if not sent_rv and rt.is_custom:
                raise errors.invalid(rt.kind_qualified, name, [{
                    "reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                    "message": "Invalid value: 0x0: must be specified for an update"}])
            self._check_rv(rt, entry, name, sent_rv)
            live = _in_version(rt, version, entry.obj)
            new = self._merge_sub(rt, live, body, subresource)
            managers = entry.managers if subresource else record_update(live, new, entry.managers, opts.manager,
                                                                         _list_keys(rt, version))
            return self._commit(rt, version, namespace, name, entry, new, managers, opts, ("Update", opts.manager))

    def patch(self, rt: ResourceType, version: str, namespace: str | None, name: str, body: Any,
              content_type: str, opts: WriteOptions | None = None, *, subresource: str | None = None) -> dict[str, Any]:
        opts = opts or WriteOptions()
        kind = content_type.split(";")[0].strip().lower()
        if kind == APPLY:
            return self._apply(rt, version, namespace, name, body, opts, subresource)
        if kind == STRATEGIC and rt.is_custom:
            raise errors.unsupported_media(content_type)
        if kind not in (MERGE, JSON_PATCH, STRATEGIC):
            raise errors.unsupported_media(content_type)
        body = _decode(body)
        with self._lock:
            entry = self._entry(rt, namespace, name)
            live = _in_version(rt, version, entry.obj)
            try:
                patched = json_patch(live, body) if kind == JSON_PATCH else merge_patch(live, body)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise errors.KubeError(422, "Invalid", f"the JSON patch could not be applied: {exc}") from None
            if not isinstance(patched, dict):
                raise errors.bad_request("a patch must leave an object")
            if isinstance(body, dict):
                self._check_rv(rt, entry, name, (body.get("metadata") or {}).get("resourceVersion"))
            new = self._merge_sub(rt, live, patched, subresource)
            managers = entry.managers if subresource else record_update(live, new, entry.managers, opts.manager,
                                                                         _list_keys(rt, version))
            return self._commit(rt, version, namespace, name, entry, new, managers, opts, ("Update", opts.manager))

    def _apply(self, rt: ResourceType, version: str, namespace: str | None, name: str, body: Any,
               opts: WriteOptions, subresource: str | None) -> dict[str, Any]:
        if opts.manager in ("", "unknown"):
            raise errors.bad_request("PATCH, application/apply-patch+yaml requires fieldManager parameter")
        body = self._body(body)
        if not body.get("apiVersion") or not body.get("kind"):
            raise errors.bad_request("invalid object type: apiVersion and kind must be set in an apply configuration")
        self._check_target(rt, namespace, name, body)
        with self._lock:
            key = (namespace or "", name)
            entry = self._objects[(rt.group, rt.plural)].get(key)
            if entry is None and subresource:
                raise errors.not_found(rt.qualified, name)
            live = _in_version(rt, version, entry.obj) if entry else None
            try:
                merged, managers = apply(live, body, entry.managers if entry else {}, opts.manager, opts.force,
                                         _list_keys(rt, version))
            except ApplyConflict as conflict:
                message, causes = conflict.message(rt.api_version(version))
                raise errors.KubeError(409, "Conflict", message, {"causes": causes}) from None
            if entry is None:
                merged.setdefault("metadata", {}).update(name=name)
                return self._commit(rt, version, namespace, name, None, merged, managers, opts, ("Apply", opts.manager))
            if subresource == "status":
                merged = self._merge_sub(rt, live or {}, {**(live or {}), "status": body.get("status", {})}, "status")
                managers = entry.managers
            else:
                merged = self._merge_sub(rt, live or {}, merged, None)
            return self._commit(rt, version, namespace, name, entry, merged, managers, opts, ("Apply", opts.manager))

    def delete(self, rt: ResourceType, version: str, namespace: str | None, name: str,
               preconditions: dict[str, Any] | None = None) -> dict[str, Any]:
        with self._lock:
            entry = self._entry(rt, namespace, name)
            meta = entry.obj["metadata"]
            pre = preconditions or {}
            if (pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]) or \
               (pre.get("uid") and pre["uid"] != meta["uid"]):
                raise errors.stale(rt.qualified, name)
            if rt.plural == "namespaces":
                self._delete_namespace_contents(name)
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    obj = copy.deepcopy(entry.obj)
                    obj["metadata"]["deletionTimestamp"] = now()
                    obj["metadata"]["deletionGracePeriodSeconds"] = 0
                    self._store(rt, namespace, name, entry, obj)
                return self._served(rt, version, entry.obj)
            del self._objects[(rt.group, rt.plural)][(namespace or "", name)]
            self._rv += 1
            if rt.is_custom or rt.plural == "pods":
                return self._served(rt, version, entry.obj)
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "kind": rt.plural, "uid": meta["uid"]}}

    # ---- persistence ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """Bumped by every write, so a changed store is one whose counter moved."""
        return self._rv

    def snapshot(self) -> dict[str, Any]:
        """Everything a restarted API server needs, as JSON-ready data (taken under the lock)."""
        with self._lock:
            objects = [{"group": group, "plural": plural, "object": copy.deepcopy(e.obj),
                        "managers": [[m, o, sorted(list(p) for p in paths)] for (m, o), paths in e.managers.items()],
                        "manager_meta": [[m, o, v, t] for (m, o), (v, t) in e.manager_meta.items()]}
                       for (group, plural), entries in self._objects.items() for e in entries.values()]
            return {"resourceVersion": self._rv, "objects": objects}

    def restore(self, data: dict[str, Any]) -> None:
        """Load a snapshot; objects of types this store no longer serves are dropped."""
        with self._lock:
            for objects in self._objects.values():
                objects.clear()
            for item in data.get("objects") or []:
                key = (item["group"], item["plural"])
                if key not in self._objects:
                    continue
                obj = _in_version(self._types[key], self._types[key].storage_version, item["object"])
                managers = {(m, o): {tuple(p) for p in paths} for m, o, paths in item.get("managers") or []}
                meta = {(m, o): (v, t) for m, o, v, t in item.get("manager_meta") or []}
                ns, name = obj["metadata"].get("namespace") or "", obj["metadata"]["name"]
                self._objects[key][(ns, name)] = _Entry(obj, managers, meta)
            self._rv = int(data.get("resourceVersion") or 0)

    # ---- internals -----------------------------------------------------------------------------

    def _entry(self, rt: ResourceType, namespace: str | None, name: str) -> _Entry:
        entry = self._objects[(rt.group, rt.plural)].get((namespace or "", name))
        if entry is None:
            raise errors.not_found(rt.qualified, name)
        return entry

    @staticmethod
    def _served(rt: ResourceType, version: str, obj: dict[str, Any]) -> dict[str, Any]:
        out = _in_version(rt, version, obj)
        out = copy.deepcopy(out) if out is obj else out
        out["apiVersion"] = rt.api_version(version)
        out["kind"] = rt.kind
        return out

    @staticmethod
    def _shallow(rt: ResourceType, version: str, obj: dict[str, Any]) -> dict[str, Any]:
        out = _in_version(rt, version, obj)
        return {**out, "apiVersion": rt.api_version(version), "kind": rt.kind}

    @staticmethod
    def _body(body: Any) -> dict[str, Any]:
        body = _decode(body)
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be an object")
        return drop_nulls(copy.deepcopy(body))

    def _check_target(self, rt: ResourceType, namespace: str | None, name: str, body: dict[str, Any]) -> None:
        meta = body.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request")
        if not name:
            raise errors.invalid(rt.kind_qualified, "", [{
                "reason": "FieldValueRequired", "field": "metadata.name",
                "message": "Required value: name or generateName is required"}])
        if len(name) > 253 or not _NAME_RE.match(name):
            raise errors.invalid(rt.kind_qualified, name, [{
                "reason": "FieldValueInvalid", "field": "metadata.name",
                "message": f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
                           "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                           "character"}])
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if (api_version and api_version.rpartition("/")[0] != rt.group) or (kind and kind != rt.kind):
            raise errors.bad_request(f"the API version in the data ({api_version}) and kind ({kind}) do not match "
                                     f"the resource {rt.qualified}")
        if rt.namespaced:
            ns_type = self._types[("", "namespaces")]
            if not namespace or ("", namespace) not in self._objects[(ns_type.group, ns_type.plural)]:
                raise errors.not_found("namespaces", namespace or "")

    @staticmethod
    def _check_rv(rt: ResourceType, entry: _Entry, name: str, sent: str | None) -> None:
        if sent and sent != entry.obj["metadata"]["resourceVersion"]:
            raise errors.stale(rt.qualified, name)

    @staticmethod
    def _merge_sub(rt: ResourceType, old: dict[str, Any], new: dict[str, Any],
                   subresource: str | None) -> dict[str, Any]:
        """Main-resource writes keep the old status; status writes keep everything but the status."""
        if subresource == "status":
            out = copy.deepcopy(old)
            if "status" in new:
                out["status"] = copy.deepcopy(new["status"])
            else:
                out.pop("status", None)
            return out
        if subresource:
            raise errors.KubeError(404, "NotFound", f"subresource {subresource!r} is not served for {rt.qualified}")
        out = copy.deepcopy(new)
        if rt.status_subresource:
            if "status" in old:
                out["status"] = copy.deepcopy(old["status"])
            else:
                out.pop("status", None)
        meta = out.setdefault("metadata", {})
        for key in _SERVER_METADATA:
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        return out

    def _validate(self, rt: ResourceType, version: str, name: str, obj: dict[str, Any],
                  opts: WriteOptions) -> dict[str, Any]:
        if rt.kind == "Secret":
            obj = _fold_string_data(obj)
        schema = rt.schemas.get(version)
        if schema is None:
            return obj
        mode = opts.field_validation or ("Strict" if self.strict_by_default else "Warn")
        unknown = schema.unknown_fields(obj)
        if unknown and mode == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise errors.bad_request(f'{rt.kind} in version "{version}" cannot be handled as a {rt.kind}: '
                                     f"strict decoding error: {listed}")
        if unknown:
            if mode == "Warn":
                opts.warnings.extend(f'unknown field "{u}"' for u in unknown)
            obj = schema.prune(obj)
        causes = schema.causes(obj)
        if causes:
            raise errors.invalid(rt.kind_qualified, name, causes)
        return obj

    def _commit(self, rt: ResourceType, version: str, namespace: str | None, name: str, entry: _Entry | None,
                new: dict[str, Any], managers: Managers, opts: WriteOptions, op: tuple[str, str]) -> dict[str, Any]:
        new["apiVersion"], new["kind"] = rt.api_version(version), rt.kind
        new = _in_version(rt, rt.storage_version, self._validate(rt, version, name, new, opts))
        meta = new.setdefault("metadata", {})
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = namespace
        if entry is None:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now()
            if rt.is_custom:
                meta["generation"] = 1
            if rt.plural == "namespaces":
                new["status"] = {"phase": "Active"}
        elif rt.is_custom and _body_of(new) != _body_of(entry.obj):
            meta["generation"] = entry.obj["metadata"].get("generation", 1) + 1
        if entry is not None and _same(entry.obj, new) and managers == entry.managers:
            return self._served(rt, version, entry.obj)  # a no-op write keeps the resourceVersion
        if opts.dry_run:
            return self._served(rt, version, new)
        new_entry = _Entry(new, managers, dict(entry.manager_meta) if entry else {})
        kind, manager = op
        if (manager, kind) in managers:
            new_entry.manager_meta[(manager, kind)] = (rt.api_version(version), now())
        meta["managedFields"] = [
            {"manager": m, "operation": o,
             "apiVersion": new_entry.manager_meta.get((m, o), (rt.api_version(version), ""))[0],
             "time": new_entry.manager_meta.get((m, o), ("", now()))[1], "fieldsType": "FieldsV1",
             "fieldsV1": fields_v1(paths)}
            for (m, o), paths in sorted(managers.items())]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._objects[(rt.group, rt.plural)].pop((namespace or "", name), None)
            self._rv += 1
            return self._served(rt, version, new)
        self._store(rt, namespace, name, new_entry, new)
        return self._served(rt, version, new)

    def _store(self, rt: ResourceType, namespace: str | None, name: str, entry: _Entry, obj: dict[str, Any]) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        entry.obj = obj
        self._objects[(rt.group, rt.plural)][(namespace or "", name)] = entry

    def _delete_namespace_contents(self, namespace: str) -> None:
        for (group, plural), objects in self._objects.items():
            rt = self._types[(group, plural)]
            if rt.namespaced:
                for ns, name in [k for k in objects if k[0] == namespace]:
                    self.delete(rt, rt.storage_version, ns, name)


class StoreFile:
    """One store kept in one file: `save` writes only when the store changed since the last save,
    through a temporary file and a rename, so a crash mid-write leaves the previous state whole."""

    def __init__(self, path: Path):
        self.path = path
        self._saved_rv: int | None = None
        self._lock = threading.Lock()

    def load(self, store: ClusterStore) -> bool:
        """Restore `store` from the file; False when there is none yet (a new cluster)."""
        if not self.path.exists():
            return False
        store.restore(json.loads(self.path.read_text()))
        self._saved_rv = store.resource_version
        return True

    def save(self, store: ClusterStore) -> bool:
        with self._lock:  # a periodic flush and the final one at stop may overlap
            if store.resource_version == self._saved_rv:
                return False
            data = store.snapshot()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            with open(tmp, "w") as fh:
                json.dump(data, fh, separators=(",", ":"))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            self._saved_rv = data["resourceVersion"]
            return True


_LIST_KEYS: dict[tuple[str, str, str, int], ListKeys] = {}


def _list_keys(rt: ResourceType, version: str) -> ListKeys:
    """How the lists of a type merge in server-side apply: by the CRD version's schema, or for built-in
    kinds by their API's merge keys."""
    schema = rt.schemas.get(version)
    key = (rt.group, rt.plural, version, id(schema))  # CRD schemas are loaded once per process and kept
    found = _LIST_KEYS.get(key)
    if found is None:
        found = _LIST_KEYS[key] = schema_list_keys(schema.schema) if schema is not None else builtin_list_keys
    return found


def _in_version(rt: ResourceType, version: str, obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` in `version`'s shape: a converted copy for kinds whose versions differ, else `obj` itself."""
    convert = _CONVERSIONS.get((rt.group, rt.plural))
    if convert is None or obj.get("apiVersion") == rt.api_version(version):
        return obj
    return convert(obj, rt.group, version)


def _decode(body: Any) -> Any:
    if isinstance(body, (bytes, str)):
        try:  # JSON first, as clients send it: the YAML parser took most of an apply at thousands of them
            return json.loads(body) if body else {}
        except (ValueError, RecursionError):
            pass
        try:
            return yaml.safe_load(body) if body else {}
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"the request body is neither JSON nor YAML: {exc}") from None
    return body


def _body_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    ignore = ("resourceVersion", "managedFields")
    strip = lambda o: {**o, "metadata": {k: v for k, v in o["metadata"].items() if k not in ignore}}  # noqa: E731
    return strip(old) == strip(new)


def _fold_string_data(obj: dict[str, Any]) -> dict[str, Any]:
    """Secrets: `stringData` is write-only and lands base64-encoded in `data`, as on a real server."""
    string_data = obj.pop("stringData", None) or {}
    data = obj.setdefault("data", {})
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    obj.setdefault("type", "Opaque")
    return obj

"""Write semantics for object bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and a
small but honest server-side apply with field ownership.

Server-side apply here tracks ownership per leaf field. Maps merge key by key. Lists merge as the
real API server merges them: a list whose schema says `x-kubernetes-list-type: map` (a CRD's, with its
`x-kubernetes-list-map-keys`) or whose built-in type names merge keys (containers and env by name, ports
by containerPort and protocol, volumes by name, volumeMounts by mountPath, ...: `BUILTIN_LIST_KEYS`)
merges item by item, each item owned as `k:{"name":"main"}` in `managedFields`, so two managers can
each own an item of one list; any other list is atomic (the whole list belongs to whoever set it last),
as a real server treats a CRD's list without a list type. Only `metadata.labels`,
`metadata.annotations` and the object's body (not `status`) are owned; status is written through
the status subresource.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FieldPath = tuple[str, ...]
ManagerKey = tuple[str, str]  # (manager, "Apply" | "Update")
Managers = dict[ManagerKey, set[FieldPath]]
# The merge keys of the list at a path (its path with each map-list item as its `k:{...}` part), or None
# when the list is atomic.
ListKeys = Callable[[FieldPath], "tuple[str, ...] | None"]
_MISSING = object()
_ITEM = "k:"  # a map-list item's part of a path, as managedFields (FieldsV1) names it

# The merge keys of built-in kinds' lists, by the list's field and its parent's field (the Kubernetes
# API's `+listType=map` / `+listMapKey` markers; a CRD embedding a PodSpec carries the same in its schema).
# The API server defaults `protocol` to TCP before merging, so an item without it merges as TCP.
BUILTIN_LIST_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",), "initContainers": ("name",), "ephemeralContainers": ("name",),
    "env": ("name",), "volumes": ("name",), "volumeMounts": ("mountPath",), "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",), "hostAliases": ("ip",), "resourceClaims": ("name",),
    "schedulingGates": ("name",), "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
}
_PORT_KEYS = {"containers": ("containerPort", "protocol"), "initContainers": ("containerPort", "protocol"),
              "ephemeralContainers": ("containerPort", "protocol"), "spec": ("port", "protocol")}
_KEY_DEFAULTS = {"protocol": "TCP"}


def builtin_list_keys(path: FieldPath) -> tuple[str, ...] | None:
    """Merge keys of a built-in kind's list at `path` (pods, services: the emulator holds no schema for them)."""
    fields = [p for p in path if not p.startswith(_ITEM)]
    if not fields:
        return None
    if fields[-1] == "ports":
        return _PORT_KEYS.get(fields[-2]) if len(fields) > 1 else None
    return BUILTIN_LIST_KEYS.get(fields[-1])


def schema_list_keys(schema: dict[str, Any]) -> ListKeys:
    """Merge keys from a CRD version's `openAPIV3Schema`: `x-kubernetes-list-type: map` lists merge by
    `x-kubernetes-list-map-keys`; every other list (set, atomic, or no list type) is atomic."""
    def keys(path: FieldPath) -> tuple[str, ...] | None:
        node: Any = schema
        for part in path:
            if not isinstance(node, dict):
                return None
            if part.startswith(_ITEM):
                node = node.get("items")
            elif part in (node.get("properties") or {}):
                node = node["properties"][part]
            elif isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
            else:
                return None
        if isinstance(node, dict) and node.get("x-kubernetes-list-type") == "map":
            return tuple(node.get("x-kubernetes-list-map-keys") or ()) or None
        return None
    return keys


def atomic_lists(path: FieldPath) -> tuple[str, ...] | None:
    return None


class _Keyed(dict):
    """A map-list seen as a map from each item's `k:{...}` part to the item (insertion order is the
    list's order)."""


def _item_part(item: Any, keys: tuple[str, ...]) -> str | None:
    if not isinstance(item, dict):
        return None
    return _ITEM + json.dumps({k: item.get(k, _KEY_DEFAULTS.get(k)) for k in keys}, separators=(",", ":"),
                              sort_keys=True)


def keyed(value: Any, list_keys: ListKeys, path: FieldPath = ()) -> Any:
    """`value` with every map-list as a `_Keyed` map (a list whose items cannot be keyed stays atomic,
    as a server would refuse it: duplicate or missing keys)."""
    if isinstance(value, dict):
        return {k: keyed(v, list_keys, (*path, k)) for k, v in value.items()}
    if isinstance(value, list) and value:
        keys = list_keys(path)
        if keys:
            parts = [_item_part(item, keys) for item in value]
            if None not in parts and len(set(parts)) == len(parts):
                return _Keyed({part: keyed(item, list_keys, (*path, part))
                               for part, item in zip(parts, value, strict=True) if part is not None})
    return value


def unkeyed(value: Any) -> Any:
    """The object again, each `_Keyed` map a list in its order."""
    if isinstance(value, _Keyed):
        return [unkeyed(v) for v in value.values()]
    if isinstance(value, dict):
        return {k: unkeyed(v) for k, v in value.items()}
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(target: Any, operations: list[dict[str, Any]]) -> Any:
    """add/remove/replace/test/copy/move, enough for what clients send to an API server."""
    doc = copy.deepcopy(target)
    for op in operations:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        if kind in ("copy", "move"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_resolve(doc, source))
            if kind == "move":
                doc = _remove_at(doc, source)
            doc = _add_at(doc, parts, value)
        elif kind == "add":
            doc = _add_at(doc, parts, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove_at(doc, parts)
        elif kind == "replace":
            doc = _remove_at(doc, parts)
            doc = _add_at(doc, parts, copy.deepcopy(op["value"]))
        elif kind == "test":
            if _resolve(doc, parts) != op.get("value"):
                raise ValueError(f"test failed at {op.get('path')!r}")
        else:
            raise ValueError(f"unknown JSON patch op {kind!r}")
    return doc


def _resolve(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _add_at(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        parent[last] = value
    return doc


def _remove_at(doc: Any, parts: list[str]) -> Any:
    parent = _resolve(doc, parts[:-1])
    if isinstance(parent, list):
        parent.pop(int(parts[-1]))
    else:
        del parent[parts[-1]]
    return doc


# ---- field ownership -------------------------------------------------------------------------

def owned_view(obj: dict[str, Any] | None) -> dict[str, Any]:
    """The part of an object that field managers can own."""
    if not obj:
        return {}
    view = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    meta = obj.get("metadata") or {}
    owned_meta = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
    if owned_meta:
        view["metadata"] = owned_meta
    return view


def leaves(value: Any, prefix: FieldPath = ()) -> dict[FieldPath, Any]:
    if isinstance(value, dict) and value:
        out: dict[FieldPath, Any] = {}
        for key, item in value.items():
            out.update(leaves(item, (*prefix, key)))
        return out
    return {prefix: value} if prefix else {}


def get_path(obj: Any, path: FieldPath) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def set_path(obj: dict[str, Any], path: FieldPath, value: Any) -> None:
    for part, following in zip(path[:-1], path[1:], strict=True):
        if not isinstance(obj.get(part), dict):
            obj[part] = _Keyed() if following.startswith(_ITEM) else {}
        obj = obj[part]
    obj[path[-1]] = value


def delete_path(obj: dict[str, Any], path: FieldPath) -> None:
    """Remove a leaf and any map it leaves empty on the way up."""
    chain = [obj]
    for part in path[:-1]:
        nxt = chain[-1].get(part)
        if not isinstance(nxt, dict):
            return
        chain.append(nxt)
    chain[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if not chain[depth]:
            chain[depth - 1].pop(path[depth - 1], None)


def _overlaps(a: FieldPath, b: FieldPath) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


@dataclass
class ApplyConflict(Exception):
    conflicts: list[tuple[str, FieldPath]]

    def message(self, api_version: str) -> tuple[str, list[dict[str, str]]]:
        causes = [{"reason": "FieldManagerConflict", "field": "." + ".".join(path),
                   "message": f'conflict with "{manager}" using {api_version}'}
                  for manager, path in self.conflicts]
        lines = "\n".join(f"- {c['message']}: {c['field']}" for c in causes)
        noun = "conflict" if len(causes) == 1 else "conflicts"
        return f"Apply failed with {len(causes)} {noun}: {lines}", causes


def apply(live: dict[str, Any] | None, applied: dict[str, Any], managers: Managers, manager: str,
          force: bool, list_keys: ListKeys = atomic_lists) -> tuple[dict[str, Any], Managers]:
    """Merge an apply configuration into the live object on behalf of `manager`.

    Returns the new object (status and server-owned metadata carried over from `live`) and the new
    ownership. Fields this manager applied before and omits now are removed unless someone else
    also owns them; fields another manager owns with a different value conflict unless `force`.
    Lists merge by their keys where `list_keys` names them, else they are atomic.
    """
    live = keyed(live, list_keys) if live else live
    applied = keyed(applied, list_keys)
    # owned_view keeps the object's layout, so an owned path is also a path into the object.
    me: ManagerKey = (manager, "Apply")
    intent = leaves(owned_view(applied))
    current_view = owned_view(live)
    managers = {k: set(v) for k, v in managers.items()}

    conflicts: list[tuple[str, FieldPath]] = []
    for key, paths in managers.items():
        if key == me:
            continue
        for owned in list(paths):
            for path in intent:
                if _overlaps(owned, path):
                    shorter = owned if len(owned) <= len(path) else path
                    if get_path(current_view, shorter) != get_path(owned_view(applied), shorter):
                        conflicts.append((key[0], owned))
                        if force:
                            paths.discard(owned)
                    break
    if conflicts and not force:
        raise ApplyConflict(sorted(set(conflicts)))

    result = copy.deepcopy(live) if live else {}
    others = set().union(*(p for k, p in managers.items() if k != me)) if managers else set()
    for path in managers.get(me, set()) - set(intent):
        if path not in others:
            delete_path(result, path)
    for path, value in intent.items():
        set_path(result, path, copy.deepcopy(value))
    managers[me] = set(intent)
    return unkeyed(result), _tidy(managers, result)


def record_update(old: dict[str, Any] | None, new: dict[str, Any], managers: Managers,
                  manager: str, list_keys: ListKeys = atomic_lists) -> Managers:
    """A create/replace/patch takes ownership of the fields it changed, from everyone else."""
    old = keyed(old, list_keys) if old else old
    new = keyed(new, list_keys)
    before, after = leaves(owned_view(old)), leaves(owned_view(new))
    changed = {p for p, v in after.items() if before.get(p, _MISSING) != v}
    removed = set(before) - set(after)
    touched = changed | removed
    out = {k: {p for p in v if not any(_overlaps(p, t) for t in touched)} for k, v in managers.items()}
    if changed:
        out.setdefault((manager, "Update"), set()).update(changed)
    return _tidy(out, new)


def _tidy(managers: Managers, obj: dict[str, Any]) -> Managers:
    view = owned_view(obj)
    kept = {k: {p for p in v if get_path(view, p) is not _MISSING} for k, v in managers.items()}
    return {k: v for k, v in kept.items() if v}


def fields_v1(paths: set[FieldPath]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(part if part.startswith(_ITEM) else f"f:{part}", {})
    return tree

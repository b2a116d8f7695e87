"""Write semantics for object bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and a
small but honest server-side apply with field ownership.

Server-side apply here tracks ownership per leaf field. Maps merge key by key; lists are atomic
(the whole list belongs to whoever set it last), which is what `listType: atomic` means and is a
simplification for `listType: map` lists such as DGD components. Only `metadata.labels`,
`metadata.annotations` and the object's body (not `status`) are owned; status is written through
the status subresource.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

FieldPath = tuple[str, ...]
ManagerKey = tuple[str, str]  # (manager, "Apply" | "Update")
Managers = dict[ManagerKey, set[FieldPath]]
_MISSING = object()


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
    for part in path[:-1]:
        if not isinstance(obj.get(part), dict):
            obj[part] = {}
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
          force: bool) -> tuple[dict[str, Any], Managers]:
    """Merge an apply configuration into the live object on behalf of `manager`.

    Returns the new object (status and server-owned metadata carried over from `live`) and the new
    ownership. Fields this manager applied before and omits now are removed unless someone else
    also owns them; fields another manager owns with a different value conflict unless `force`.
    """
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
    return result, _tidy(managers, result)


def record_update(old: dict[str, Any] | None, new: dict[str, Any], managers: Managers,
                  manager: str) -> Managers:
    """A create/replace/patch takes ownership of the fields it changed, from everyone else."""
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
            node = node.setdefault(f"f:{part}", {})
    return tree

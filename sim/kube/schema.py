"""Validation of custom objects against a CRD version's `openAPIV3Schema`, the way the API server
does it: type/enum/required/range errors become 422 causes naming the field, and fields the schema
does not declare are reported so the caller can reject them (Strict) or drop them (Ignore/Warn).

CEL rules (`x-kubernetes-validations`) are not evaluated; nothing here needs them to be honest.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft4Validator
from jsonschema.exceptions import ValidationError


def field_path(parts: list[Any] | tuple[Any, ...]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def drop_nulls(value: Any) -> Any:
    """The API server drops `null` for fields that are not nullable; none in the Dynamo CRDs are."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + '..."'


def _causes_for(error: ValidationError) -> list[dict[str, str]]:
    path = list(error.absolute_path)
    where = field_path(path)
    if error.validator == "required":
        instance = error.instance if isinstance(error.instance, dict) else {}
        return [{"reason": "FieldValueRequired", "message": "Required value",
                 "field": field_path([*path, name])}
                for name in error.validator_value if name not in instance]
    if error.validator == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.validator_value)
        return [{"reason": "FieldValueNotSupported", "field": where,
                 "message": f"Unsupported value: {_shown(error.instance)}: supported values: {allowed}"}]
    if error.validator == "type":
        return [{"reason": "FieldValueTypeInvalid", "field": where,
                 "message": f"Invalid value: {_shown(error.instance)}: {where} in body must be of type "
                            f"{error.validator_value}: {_shown(error.instance)}"}]
    rule = _RULES.get(error.validator)
    text = rule.format(error.validator_value) if rule else error.message
    return [{"reason": "FieldValueInvalid", "field": where,
             "message": f"Invalid value: {_shown(error.instance)}: {where} in body {text}"}]


# The API server's wording for the common range and size rules.
_RULES = {
    "minimum": "should be greater than or equal to {}",
    "maximum": "should be less than or equal to {}",
    "minLength": "should be at least {} chars long",
    "maxLength": "may not be more than {} chars long",
    "minItems": "should have at least {} items",
    "maxItems": "must have at most {} items",
    "pattern": "should match '{}'",
}


class ObjectSchema:
    def __init__(self, openapi_schema: dict[str, Any]):
        self.schema = openapi_schema
        # metadata is validated by the server itself, never by the CRD schema.
        self._validator = Draft4Validator({**openapi_schema, "properties": {
            k: v for k, v in openapi_schema.get("properties", {}).items() if k != "metadata"}})

    def causes(self, obj: dict[str, Any]) -> list[dict[str, str]]:
        body = {k: v for k, v in obj.items() if k != "metadata"}
        causes: list[dict[str, str]] = []
        seen: set[tuple[str, str]] = set()
        errors = sorted(self._validator.iter_errors(body), key=lambda e: [str(p) for p in e.absolute_path])
        for error in errors:
            for cause in _causes_for(error):
                key = (cause["field"], cause["message"])
                if key not in seen:
                    seen.add(key)
                    causes.append(cause)
        return causes

    def unknown_fields(self, obj: dict[str, Any]) -> list[str]:
        out: list[str] = []
        body = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
        _walk_unknown(self.schema, body, [], out)
        return out

    def prune(self, obj: dict[str, Any]) -> dict[str, Any]:
        pruned = json.loads(json.dumps(obj))
        for path in self.unknown_fields(obj):
            _remove(pruned, path)
        return pruned


def _walk_unknown(schema: dict[str, Any], value: Any, path: list[Any], out: list[str]) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
        for key, item in value.items():
            if key in props:
                _walk_unknown(props[key], item, [*path, key], out)
            elif isinstance(extra, dict):
                _walk_unknown(extra, item, [*path, key], out)
            elif not (preserve or extra is True):
                out.append(field_path([*path, key]))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk_unknown(schema["items"], item, [*path, index], out)


def _remove(obj: Any, dotted: str) -> None:
    # Re-parse "a.b[2].c" into keys; names in CRD schemas never contain dots or brackets.
    parts: list[Any] = []
    for chunk in dotted.split("."):
        name, *indexes = chunk.split("[")
        if name:
            parts.append(name)
        parts.extend(int(i.rstrip("]")) for i in indexes)
    for part in parts[:-1]:
        obj = obj[part]
    del obj[parts[-1]]

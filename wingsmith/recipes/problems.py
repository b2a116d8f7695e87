"""What the importer says about a file it could not use: the file, the field and why."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError


class ImportProblem(BaseModel, frozen=True):
    file: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.reason}"


class BadField(ValueError):
    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def from_validation_error(exc: ValidationError, prefix: str = "") -> BadField:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err.get("loc", ()))
    return BadField(".".join(p for p in (prefix, field) if p) or "(document)", err.get("msg", "invalid"))


# Small readers that name the field when upstream data has the wrong shape.

def mapping(value: Any, field: str, *, required: bool = False) -> dict:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise BadField(field, "missing" if value is None else f"expected a mapping, got {type(value).__name__}")
    return value


def str_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadField(field, f"expected a list, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise BadField(f"{field}[{i}]", f"expected a string, got {type(item).__name__}")
        out.append(str(item))
    return out


def str_map(value: Any, field: str) -> dict[str, str]:
    out = {}
    for key, item in mapping(value, field).items():
        if isinstance(item, (dict, list)):
            raise BadField(f"{field}.{key}", "expected a scalar value")
        out[str(key)] = "" if item is None else str(item)
    return out

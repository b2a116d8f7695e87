"""What the importer says about a file it could not use: the file, the field and why."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T")


class ImportProblem(BaseModel, frozen=True):
    file: str
    field: str
    reason: str
    # file: nothing of the file was used; part: that field was dropped and the rest kept;
    # warning: kept, but a reviewer should know (e.g. a flag the shell would mangle).
    scope: Literal["file", "part", "warning"] = "file"

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.reason}"


class Unreadable(NamedTuple):
    """A file of a snapshot that could not be read (the reader's reason, e.g. "Permission denied")."""
    reason: str


# An upstream snapshot as the importers take it: each file's path (POSIX, relative to the repository's
# root) and its text, or why it could not be read. Reading it from a directory is the adapter's part
# (wingsmith/adapters/recipes/files.py); the importers only parse.
Snapshot = Mapping[str, str | Unreadable]


def path_order(path: str) -> list[str]:
    """The order pathlib sorts paths in (by their parts), so problems and entries keep upstream's order."""
    return path.split("/")


class PartProblems:
    """Collects the parts of one file that were dropped, so one bad field never costs the file."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[ImportProblem] = []

    def note(self, field: str, reason: str, scope: Literal["part", "warning"] = "part") -> None:
        self.problems.append(ImportProblem(file=self.file, field=field, reason=reason, scope=scope))

    def keep(self, read: Callable[[], T], default: T) -> T:
        """read(), or `default` with the dropped field noted when it raises BadField."""
        try:
            return read()
        except BadField as exc:
            self.note(exc.field, exc.reason)
            return default

    def each(self, value: Any, field: str, read: Callable[[str, Any, str], T]) -> dict[str, T]:
        """read(key, item, field path) for every entry of a mapping, dropping only the bad entries."""
        out: dict[str, T] = {}
        empty: dict[Any, Any] = {}
        for key, item in self.keep(lambda: mapping(value, field), empty).items():
            try:
                out[str(key)] = read(str(key), item, f"{field}.{key}")
            except BadField as exc:
                self.note(exc.field, exc.reason)
            except ValidationError as exc:
                bad = from_validation_error(exc, f"{field}.{key}")
                self.note(bad.field, bad.reason)
        return out


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

def mapping(value: Any, field: str, *, required: bool = False) -> dict[Any, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise BadField(field, "missing" if value is None else f"expected a mapping, got {type(value).__name__}")
    return value


def items(value: Any, field: str) -> list[Any]:
    """A list field's items (none when it is absent)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadField(field, f"expected a list, got {type(value).__name__}")
    return value


def str_list(value: Any, field: str) -> list[str]:
    out = []
    for i, item in enumerate(items(value, field)):
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

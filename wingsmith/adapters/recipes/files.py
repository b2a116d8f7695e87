"""The catalog on disk: an adapter (the domain parses the snapshots it reads: wingsmith/domain/recipes/). Reads upstream
snapshots from directories for the pure importers, writes and stores catalogs, and loads the one a
draft needs: the shipped catalog, a stored version, or the one in force.

Stored versions are written once and never rewritten: drafts point at them."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from wingsmith.domain.recipes import dynamo_import, vllm_import
from wingsmith.domain.recipes.catalog import (
    ImportReport,
    catalog_from_snapshots,
    catalog_json,
    parse_catalog,
    source_stamp,
)
from wingsmith.domain.recipes.models import Catalog, SourceStamp
from wingsmith.domain.recipes.problems import Unreadable

SHIPPED_CATALOG = Path(__file__).with_name("catalog.json")


def read_snapshot(root: Path, globs: tuple[str, ...]) -> dict[str, str | Unreadable]:
    """The files under `root` the globs find, by their path relative to it: the text, or why it could
    not be read."""
    root = Path(root)
    out: dict[str, str | Unreadable] = {}
    for pattern in globs:
        for path in root.glob(pattern):
            rel = path.relative_to(root).as_posix()
            try:
                out[rel] = path.read_text()
            except OSError as exc:
                out[rel] = Unreadable(exc.strerror or str(exc))
    return out


def read_source_stamp(root: Path) -> SourceStamp:
    """The repository and commit a snapshot says it came from (its SOURCE.md), when it says so."""
    source = Path(root) / "SOURCE.md"
    return source_stamp(source.read_text() if source.exists() else None)


def build_catalog(vllm_dir: Path, dynamo_dir: Path, *, vllm_source: SourceStamp | None = None,
                  dynamo_source: SourceStamp | None = None) -> tuple[Catalog, ImportReport]:
    """The catalog of the two upstream trees on disk (`wingsmith recipes import`)."""
    return catalog_from_snapshots(
        read_snapshot(vllm_dir, vllm_import.GLOBS), read_snapshot(dynamo_dir, dynamo_import.GLOBS),
        vllm_source=vllm_source or read_source_stamp(vllm_dir),
        dynamo_source=dynamo_source or read_source_stamp(dynamo_dir))


def write_catalog(catalog: Catalog, path: Path) -> None:
    """Write (or replace) one file atomically: used for the shipped catalog and `--out`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(catalog_json(catalog))
    os.replace(tmp, path)


class CatalogVersionExists(Exception):
    pass


def store_catalog_version(catalog: Catalog, directory: Path) -> Path:
    """Add a catalog to a directory of versions. A version is never rewritten: drafts point at it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{catalog.version}.json"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise CatalogVersionExists(f"catalog version {catalog.version} is already stored at {path}") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(catalog_json(catalog))
    return path


def read_catalog(path: Path) -> Catalog:
    return parse_catalog(Path(path).read_text(), where=path)


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped with the plane (built from ../shared/upstream by `wingsmith recipes import`)."""
    return read_catalog(SHIPPED_CATALOG)


def load_catalog_version(version: str, directory: Path | None = None) -> Catalog:
    """The catalog a draft was built from: the shipped one or a stored refresh."""
    shipped = load_catalog()
    if version == shipped.version:
        return shipped
    if directory is not None:
        path = Path(directory) / f"{version}.json"
        if path.exists():
            return read_catalog(path)
    raise LookupError(f"catalog version {version!r} is not the shipped one and is not stored"
                      + (f" in {directory}" if directory else ""))


# --- the catalog in force: what new drafts are built from ------------------------------------------
# The shipped catalog, unless `<catalogs dir>/in-force` names a stored version (a refresh, or a local
# edit). The watch compares it with the catalog an approved draft came from.

IN_FORCE = "in-force"


def catalog_in_force(directory: Path | None) -> Catalog:
    if directory is None:
        return load_catalog()
    try:
        version = (Path(directory) / IN_FORCE).read_text().strip()
    except FileNotFoundError:
        return load_catalog()
    return _stored_version(version, str(Path(directory)))


@lru_cache(maxsize=8)
def _stored_version(version: str, directory: str) -> Catalog:
    # Stored versions are never rewritten, so a version read once stays right.
    return load_catalog_version(version, Path(directory))


def catalog_of_draft(version: str | None, directory: Path | None) -> Catalog:
    """The catalog a draft's evidence came from, which a workload planned from that draft must use
    (its flags are what the reviewer approved); the shipped one if the draft names no other, or if
    this plane no longer holds that version."""
    if not version or version == load_catalog().version or directory is None:
        return load_catalog()
    try:
        return _stored_version(version, str(Path(directory)))
    except (LookupError, ValueError):
        return load_catalog()


def put_in_force(catalog: Catalog, directory: Path) -> Path:
    """Store the catalog (if it is new) and make it the one new drafts are built from."""
    directory = Path(directory)
    if catalog.version != load_catalog().version:
        try:
            store_catalog_version(catalog, directory)
        except CatalogVersionExists:
            pass
    directory.mkdir(parents=True, exist_ok=True)
    pointer = directory / IN_FORCE
    tmp = pointer.with_suffix(".tmp")
    tmp.write_text(catalog.version + "\n")
    os.replace(tmp, pointer)
    return pointer

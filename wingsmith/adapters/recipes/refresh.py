"""Fetch newer upstream snapshots, pinned to a commit, and add them as a new catalog version.

Uses GitHub's public REST API for the file list (`/repos/{repo}/git/trees/{sha}`) and the raw file
host for contents; both base URLs are configurable so a mirror or a local test server can stand in.
Existing versions are never rewritten, so a draft's evidence keeps meaning what it meant."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import httpx
from pydantic import BaseModel

from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.recipes.files import CatalogVersionExists, build_catalog, read_catalog, store_catalog_version
from wingsmith.domain.recipes import dynamo_import, vllm_import
from wingsmith.domain.recipes.catalog import ImportReport
from wingsmith.domain.recipes.models import Catalog, SourceStamp

GITHUB_API = "https://api.github.com"
GITHUB_RAW = "https://raw.githubusercontent.com"
VLLM_REPO = "vllm-project/recipes"
DYNAMO_REPO = "ai-dynamo/dynamo"
_SHA = re.compile(r"^[0-9a-f]{40}$")

# The files each importer reads (it says which).
VLLM_FILES = vllm_import.FILES
DYNAMO_FILES = dynamo_import.FILES


class RefreshFailed(Exception):
    pass


class RefreshResult(BaseModel):
    version: str
    path: str
    created: bool  # False: that exact catalog was already stored
    vllm_source: SourceStamp
    dynamo_source: SourceStamp
    report: ImportReport


def _get(client: httpx.Client, url: str) -> httpx.Response:
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        raise RefreshFailed(f"could not reach {url}: {exc.__class__.__name__}") from None
    if response.status_code != 200:
        raise RefreshFailed(f"{url} answered {response.status_code}")
    return response


def resolve_commit(client: httpx.Client, api_url: str, repo: str, ref: str) -> str:
    if _SHA.match(ref):
        return ref
    sha = _get(client, f"{api_url}/repos/{repo}/commits/{ref}").json().get("sha", "")
    if not _SHA.match(str(sha)):
        raise RefreshFailed(f"{repo}@{ref} did not resolve to a commit")
    return sha


def fetch_snapshot(client: httpx.Client, *, api_url: str, raw_url: str, repo: str, commit: str,
                   patterns: re.Pattern, dest: Path) -> int:
    """Download the files of `repo` at `commit` whose paths match `patterns` into dest; returns the count."""
    tree = _get(client, f"{api_url}/repos/{repo}/git/trees/{commit}?recursive=1").json()
    if tree.get("truncated"):
        raise RefreshFailed(f"the file list of {repo}@{commit} was truncated by the server")
    paths = [e["path"] for e in tree.get("tree", []) if e.get("type") == "blob" and patterns.fullmatch(e["path"])]
    for path in paths:
        if ".." in Path(path).parts:
            raise RefreshFailed(f"refusing path {path!r} from {repo}")
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_get(client, f"{raw_url}/{repo}/{commit}/{path}").content)
    return len(paths)


def refresh_catalog(catalog_dir: Path, *, vllm_ref: str = "main", dynamo_ref: str = "main",
                    vllm_repo: str = VLLM_REPO, dynamo_repo: str = DYNAMO_REPO, api_url: str = GITHUB_API,
                    raw_url: str = GITHUB_RAW, timeout: float = 30.0,
                    transport: httpx.BaseTransport | None = None) -> RefreshResult:
    api_url, raw_url = api_url.rstrip("/"), raw_url.rstrip("/")
    with httpx.Client(timeout=timeout, follow_redirects=True, transport=transport, verify=default_tls(),
                      headers={"Accept": "application/vnd.github+json", "User-Agent": "wingsmith"}) as client, \
            tempfile.TemporaryDirectory(prefix="wingsmith-recipes-") as tmp:
        vllm_sha = resolve_commit(client, api_url, vllm_repo, vllm_ref)
        dynamo_sha = resolve_commit(client, api_url, dynamo_repo, dynamo_ref)
        vllm_dir, dynamo_dir = Path(tmp) / "vllm", Path(tmp) / "dynamo"
        vllm_dir.mkdir()
        dynamo_dir.mkdir()
        if not fetch_snapshot(client, api_url=api_url, raw_url=raw_url, repo=vllm_repo, commit=vllm_sha,
                              patterns=VLLM_FILES, dest=vllm_dir):
            raise RefreshFailed(f"{vllm_repo}@{vllm_sha} has no recipe files")
        fetch_snapshot(client, api_url=api_url, raw_url=raw_url, repo=dynamo_repo, commit=dynamo_sha,
                       patterns=DYNAMO_FILES, dest=dynamo_dir)
        vllm_source = SourceStamp(repository=f"https://github.com/{vllm_repo}", commit=vllm_sha)
        dynamo_source = SourceStamp(repository=f"https://github.com/{dynamo_repo}", commit=dynamo_sha)
        catalog, report = build_catalog(vllm_dir, dynamo_dir, vllm_source=vllm_source, dynamo_source=dynamo_source)
    if not catalog.recipes:
        raise RefreshFailed("the fetched snapshot yielded no usable recipe; nothing stored")
    path = Path(catalog_dir) / f"{catalog.version}.json"
    try:
        store_catalog_version(catalog, Path(catalog_dir))
        created = True
    except CatalogVersionExists:
        created = False
    return RefreshResult(version=catalog.version, path=str(path), created=created, vllm_source=vllm_source,
                         dynamo_source=dynamo_source, report=report)


def stored_versions(catalog_dir: Path) -> list[Catalog]:
    return [read_catalog(p) for p in sorted(Path(catalog_dir).glob("*.json"))]

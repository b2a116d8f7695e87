from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wingsmith.recipes import Catalog, build_catalog


@pytest.fixture(scope="session")
def vllm_dir(upstream_dir: Path) -> Path:
    return upstream_dir / "vllm-recipes"


@pytest.fixture(scope="session")
def dynamo_dir(upstream_dir: Path) -> Path:
    return upstream_dir / "dynamo"


@pytest.fixture(scope="session")
def built(vllm_dir: Path, dynamo_dir: Path):
    """A catalog built now from ../shared/upstream, and its import report."""
    return build_catalog(vllm_dir, dynamo_dir)


@pytest.fixture(scope="session")
def catalog(built) -> Catalog:
    return built[0]


@pytest.fixture
def snapshot_copy(tmp_path: Path, vllm_dir: Path, dynamo_dir: Path) -> tuple[Path, Path]:
    """Writable copies of the upstream snapshots (data files only) for breaking things on purpose."""
    vllm = tmp_path / "vllm"
    dynamo = tmp_path / "dynamo"
    shutil.copytree(vllm_dir, vllm, ignore=shutil.ignore_patterns("*.md", "LICENSE"))
    shutil.copytree(dynamo_dir / "recipes", dynamo / "recipes")
    shutil.copy(vllm_dir / "SOURCE.md", vllm / "SOURCE.md")
    shutil.copy(dynamo_dir / "SOURCE.md", dynamo / "SOURCE.md")
    return vllm, dynamo


def shared_upstream() -> Path:
    """The upstream directory, from the project-wide locator (tests/upstream.py: WINGSMITH_UPSTREAM_DIR,
    else ../shared/upstream); the caller is skipped with the reason (failed under CI) when it is absent."""
    from tests.upstream import require_upstream
    return require_upstream()


FIXTURES = Path(__file__).with_name("fixtures")


@pytest.fixture
def fixture_trees(tmp_path: Path) -> tuple[Path, Path]:
    """The project's upstream-shaped fixtures, with upstream's own strategies/ and taxonomy.yaml."""
    vllm, dynamo = tmp_path / "vllm", tmp_path / "dynamo"
    shutil.copytree(FIXTURES / "vllm", vllm)
    shutil.copytree(FIXTURES / "dynamo", dynamo)
    upstream = shared_upstream() / "vllm-recipes"
    shutil.copytree(upstream / "strategies", vllm / "strategies")
    shutil.copy(upstream / "taxonomy.yaml", vllm / "taxonomy.yaml")
    return vllm, dynamo

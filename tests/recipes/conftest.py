from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from wingsmith.adapters.recipes.files import SHIPPED_CATALOG, build_catalog, read_catalog
from wingsmith.domain.recipes import Catalog
from wingsmith.domain.recipes.models import Override, PdRole, Strategy


@pytest.fixture(scope="session")
def vllm_dir(upstream_dir: Path) -> Path:
    return upstream_dir / "vllm-recipes"


@pytest.fixture(scope="session")
def dynamo_dir(upstream_dir: Path) -> Path:
    return upstream_dir / "dynamo"


@pytest.fixture(scope="session")
def built(vllm_dir: Path, dynamo_dir: Path):
    """Upstream tier: a catalog built now from the full upstream trees, and its import report."""
    return build_catalog(vllm_dir, dynamo_dir)


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    """The catalog the repository ships (its own copy; test_import.py checks, in the upstream tier, that
    it is exactly the build of the upstream trees)."""
    return read_catalog(SHIPPED_CATALOG)


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


FIXTURES = Path(__file__).with_name("fixtures")


def _override(o: Override) -> dict:
    return {"extra_args": o.args, "extra_env": o.env} | ({"docker_image": o.docker_image} if o.docker_image else {})


def _pd_role(role: PdRole) -> dict:
    block = {"parallelism": role.parallelism, "tp": role.tp, "nodes": role.nodes, "vllm_args": role.args,
             "env": role.env, "hardware_overrides": {k: _override(o) for k, o in role.hardware_overrides.items()}}
    return {k: v for k, v in block.items() if v is not None}


def _strategy(s: Strategy) -> dict:
    match = {"min_gpus": s.min_gpus, "multi_node": s.multi_node} | ({"max_gpus": s.max_gpus} if s.max_gpus else {})
    doc = {"name": s.name, "deploy_type": s.deploy_type, "parallel_flag": s.parallel_flag, "vllm_args": s.args,
           "env": s.env, "hardware_match": match | ({"architecture": "moe"} if s.moe_only else {})}
    doc |= {"parallelism": s.parallelism} if s.parallelism else {}
    doc |= {role: _pd_role(block) for role, block in (("prefill", s.prefill), ("decode", s.decode)) if block}
    return doc


def write_vocabulary(catalog: Catalog, vllm: Path) -> None:
    """The shipped catalog's layouts and cards written back in upstream's formats (`strategies/*.yaml`,
    `taxonomy.yaml`), so fixtures speak upstream's own vocabulary without the upstream tree.
    test_fixture_shapes.py checks reading them back gives the catalog's facts again."""
    for strategy in catalog.strategies.values():
        path = vllm / strategy.source_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(_strategy(strategy), sort_keys=False))
    profiles = {card.id: card.model_dump(exclude={"id"}) for card in catalog.hardware.values()}
    (vllm / "taxonomy.yaml").write_text(yaml.safe_dump({"hardware_profiles": profiles}, sort_keys=False))


def catalog_of(tmp_path: Path, catalog: Catalog, recipes: dict[str, str], org: str = "fixture-lab") -> Catalog:
    """A catalog built by the real importer from these recipes (name → upstream YAML) under `org`, with the
    shipped catalog's vocabulary and no Dynamo recipes: fixtures for shapes the upstream tree lacks."""
    vllm, dynamo = tmp_path / "vllm", tmp_path / "dynamo"
    for name, text in recipes.items():
        path = vllm / "models" / org / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (dynamo / "recipes").mkdir(parents=True)
    write_vocabulary(catalog, vllm)
    built, report = build_catalog(vllm, dynamo)
    assert set(built.recipes) == {f"{org}/{name}" for name in recipes}, report.problems
    return built


@pytest.fixture
def fixture_trees(tmp_path: Path, catalog: Catalog) -> tuple[Path, Path]:
    """The project's upstream-shaped fixtures, with the shipped catalog's strategies/ and taxonomy.yaml."""
    vllm, dynamo = tmp_path / "vllm", tmp_path / "dynamo"
    shutil.copytree(FIXTURES / "vllm", vllm)
    shutil.copytree(FIXTURES / "dynamo", dynamo)
    write_vocabulary(catalog, vllm)
    return vllm, dynamo

"""The DGD conversion against every upstream Dynamo recipe (upstream tier): each converts into the
other version in that version's shape (no field its schema lacks), and back to exactly what was
written. Values are not re-checked: an API server validates the version a client wrote in only, and
some recipes hold values v1beta1 refuses (`componentType: main`) or kustomize placeholders."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from sim.kube.conversion import HUB, SPOKE, convert
from sim.kube.resources import DEFAULT_CRD_DIR, load_crds
from sim.kube.schema import drop_nulls
from tests.upstream import require_upstream
from wingsmith.domain.recipes.vllm_import import SAFE_LOADER

RECIPES = require_upstream("dynamo", "recipes")
GROUP = "nvidia.com"


def _graphs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(RECIPES.rglob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=SAFE_LOADER):  # noqa: S506  (the safe loader, in C: 2 s less per collector)
            if isinstance(doc, dict) and doc.get("kind") == "DynamoGraphDeployment":
                # What an API server keeps of the file: nulls are dropped before anything else.
                found.append((str(path.relative_to(RECIPES)), drop_nulls(doc)))
    return found


GRAPHS = _graphs()
SCHEMAS = next(rt.schemas for _, rt in load_crds(DEFAULT_CRD_DIR) if rt.plural == "dynamographdeployments")


def test_both_versions_occur_upstream():
    versions = {doc["apiVersion"] for _, doc in GRAPHS}
    assert versions == {f"{GROUP}/{HUB}", f"{GROUP}/{SPOKE}"}


@pytest.mark.parametrize(("where", "doc"), GRAPHS, ids=[w for w, _ in GRAPHS])
def test_converts_into_the_other_schema_and_back(where, doc):
    version = doc["apiVersion"].rpartition("/")[2]
    other = SPOKE if version == HUB else HUB
    converted = convert(doc, GROUP, other)
    assert converted["apiVersion"] == f"{GROUP}/{other}"
    assert SCHEMAS[other].unknown_fields(converted) == []
    assert convert(converted, GROUP, version) == doc

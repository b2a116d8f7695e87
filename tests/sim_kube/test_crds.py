"""The emulator's CRDs ship inside the repository, schemas only, rebuildable from upstream."""

from __future__ import annotations

import json

from sim.kube import build_crds
from sim.kube.resources import DEFAULT_CRD_DIR, crd_dir, load_crds
from tests.upstream import require_upstream


def test_the_default_crd_directory_is_inside_the_repository():
    kinds = {rt.kind for _, rt in load_crds(crd_dir())}
    assert crd_dir() == DEFAULT_CRD_DIR
    assert {"DynamoGraphDeployment", "AIGatewayRoute", "AIServiceBackend", "Backend"} <= kinds


def test_shipped_crds_carry_schemas_and_their_source_but_no_upstream_prose():
    for path in DEFAULT_CRD_DIR.glob("*.json"):
        crd = json.loads(path.read_text())
        assert crd["metadata"]["annotations"][build_crds.SOURCE_ANNOTATION].startswith(
            "https://github.com/ai-dynamo/dynamo/blob/"), path.name
        for version in crd["spec"]["versions"]:
            assert version["schema"]["openAPIV3Schema"]["type"] == "object"
        # `description` may be a declared property (a field users set), never a prose keyword.
        text = path.read_text()
        assert '"description": "' not in text, path.name


def test_a_property_named_description_survives_the_stripping():
    schema = {"type": "object", "description": "prose", "properties": {
        "description": {"type": "string", "description": "more prose"}, "items": {"type": "array"}}}
    assert build_crds.without_descriptions(schema) == {
        "type": "object", "properties": {"description": {"type": "string"}, "items": {"type": "array"}}}


def test_shipped_crds_are_the_build_of_upstream():
    """Upstream tier: rebuilding from the recorded snapshot gives the files in the repository."""
    built = build_crds.build(require_upstream("dynamo"))
    shipped = {p.name: p.read_text() for p in DEFAULT_CRD_DIR.glob("*.json")}
    assert {name: build_crds.render(crd) for name, crd in built.items()} == shipped

"""Every route says what it answers: a pydantic response model, or (pages, files, metrics, empty
answers) an explicit non-JSON `response_class` with `response_model=None`. So the OpenAPI schema
shows each answer's shape and FastAPI checks each answer against it; a new route that returns a bare
dict fails here. Like test_auth_matrix, it walks the real app's routes, so none can be missed."""

from __future__ import annotations

import ast
import types
import typing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.datastructures import DefaultPlaceholder
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel

from api import responses
from api.app import create_app
from api.auth import TokenTable
from api.responses import (
    ArtifactDetail,
    ArtifactSummary,
    Deployment,
    Draft,
    EndpointDetail,
    EndpointSummary,
    Event,
    Placement,
    Review,
    Stored,
    WorkloadDetail,
    WorkloadSummary,
    answer_fields,
)
from tests.python_source import parse
from wingsmith.domain.config import Settings


def _app():
    return create_app(Settings(auth_tokens="{}", log_format="json"), tokens=TokenTable({}))


def _is_models(annotation: object) -> bool:
    """A model, a list of models, or a union of those: a shape, never dict or Any."""
    if isinstance(annotation, type):
        return issubclass(annotation, BaseModel)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return all(arg is type(None) or _is_models(arg) for arg in typing.get_args(annotation))
    if origin is list:
        return all(_is_models(arg) for arg in typing.get_args(annotation))
    return False


def _problem(route: APIRoute) -> str | None:
    if route.response_model is not None:
        return None if _is_models(route.response_model) else f"response_model {route.response_model!r} is not a model"
    declared = route.response_class
    if isinstance(declared, DefaultPlaceholder):
        return "no response_model, and no response_class saying the answer is not JSON"
    if issubclass(declared, JSONResponse):
        return f"answers JSON ({declared.__name__}) without a response_model"
    return None


def test_every_route_declares_what_it_answers():
    app = _app()
    # FastAPI's own pages (the schema and its viewers) are the only routes not declared by the API.
    framework = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    problems, seen = [], 0
    for context in iter_route_contexts(app.routes):
        route = context.route
        if not isinstance(route, APIRoute):
            assert context.path in framework, f"{context.path}: not an APIRoute, so it declares nothing"
            continue
        seen += 1
        problem = _problem(route)
        if problem:
            problems.append(f"{sorted(context.methods or ())} {context.path}: {problem}")
    assert seen > 30, "the walk found too few routes: has the route tree changed shape?"
    assert not problems, "\n".join(problems)


def test_every_json_answer_in_the_schema_has_a_shape():
    """What the fuzz and clients read: each success answer of each operation names its schema."""
    empty = []
    for path, operations in _app().openapi()["paths"].items():
        for method, operation in operations.items():
            for status, answer in operation["responses"].items():
                if not status.startswith("2"):
                    continue
                schema = answer.get("content", {}).get("application/json", {}).get("schema")
                if status != "204" and not schema:
                    empty.append(f"{method.upper()} {path} {status}")
    assert not empty, f"success answers without a schema: {empty}"


def test_a_registry_row_keeps_the_json_it_always_had():
    """Response models must not change what clients read: timestamps stay `isoformat()` ("+00:00",
    not pydantic's "Z"), and the console gets them as datetimes."""
    dumped = ArtifactSummary.model_validate(ROWS[ArtifactSummary]).model_dump(mode="json")
    assert dumped["created_at"] == AT.isoformat() == "2026-01-02T03:04:05.678901+00:00"
    assert answer_fields(ArtifactSummary.model_validate(ROWS[ArtifactSummary]))["created_at"] == AT


# ---- a column a later migration adds never reaches clients unnamed (issue #49) ---------------------------

AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
SHA = "0" * 40
EVENT = {"step": "register", "kind": "artifact_registered", "actor": "ada", "detail": {}, "at": AT}
DEPLOYMENT = {"cluster": "sim-east", "revision": 1, "dgd_name": "kimi", "replicas": 1, "state": "serving",
              "frontend_url": "http://127.0.0.1:9"}
WORKLOAD = {"id": "kimi", "artifact_id": f"acme/m@{SHA}", "state": "serving", "workflow_id": "workload/kimi",
            "requested_by": "olga", "team": "default", "spec": {"replicas": 1}, "created_at": AT, "updated_at": AT}
ENDPOINT = {"name": "kimi", "workloads": ["kimi"], "state": "serving", "routes": [], "team": "default",
            "requested_by": "olga", "updated_at": AT}
ARTIFACT = {"id": f"acme/m@{SHA}", "repo_id": "acme/m", "revision": "main", "sha": SHA, "state": "draft",
            "workflow_id": f"artifact/acme/m@{SHA}", "requested_by": "ada", "superseded_by": None,
            "created_at": AT, "updated_at": AT}
DRAFT = {"artifact_id": ARTIFACT["id"], "version": 1, "catalog_version": "c1", "evidence": {}, "sizing": {},
         "warnings": [], "created_at": AT, "diff_base": None}
REVIEW = {"artifact_id": ARTIFACT["id"], "draft_version": 1, "decision": "approve", "reviewer": "ana", "via": "api",
          "comment": "", "selections": {}, "decided_at": AT}
# Each registry-row model, from a row as the store hands it out (select * where the store selects *).
ROWS: dict[type[Stored], dict[str, Any]] = {
    Event: EVENT,
    ArtifactSummary: {**ARTIFACT, "draft_version": 1},
    Draft: DRAFT,
    Review: REVIEW,
    ArtifactDetail: {**ARTIFACT, "proposal": {}, "draft": DRAFT, "review": REVIEW, "events": [EVENT],
                     "workflow_url": "http://ui", "live": None, "diff": None},
    Deployment: {**DEPLOYMENT, "workload_id": "kimi", "namespace": "wingsmith", "detail": {}, "updated_at": AT},
    WorkloadSummary: {**WORKLOAD, "deployments": [DEPLOYMENT]},
    Placement: {"revision": 1, "decision": {}},
    WorkloadDetail: {**WORKLOAD, "deployments": [DEPLOYMENT], "placement": {"revision": 1, "decision": {}},
                     "events": [EVENT], "follow": "manual", "workflow_url": "http://ui", "live": None, "upgrade": None},
    EndpointSummary: ENDPOINT,
    EndpointDetail: {**ENDPOINT, "workflow_id": "endpoint/kimi", "workflow_url": "http://ui", "created_at": AT,
                     "health": None, "conditions": []},
}


# The fields that hold rows of other tables (the rest hold JSON documents, whose keys are the document's).
NESTED_ROWS = ("draft", "review", "events", "deployments", "placement")


def _with_a_later_column(row: dict[str, Any]) -> dict[str, Any]:
    """The row, and every row inside it, with a column no model names."""
    def widened(value: Any) -> Any:
        if isinstance(value, list):
            return [widened(v) for v in value]
        return _with_a_later_column(value) if isinstance(value, dict) else value
    return {**{k: widened(v) if k in NESTED_ROWS else v for k, v in row.items()}, "a_later_column": "secret"}


def test_every_registry_row_model_is_tested_here():
    row_models = {m for m in vars(responses).values()
                  if isinstance(m, type) and issubclass(m, Stored) and m is not Stored}
    assert row_models == set(ROWS)


@pytest.mark.parametrize("model", list(ROWS), ids=lambda m: m.__name__)
def test_a_column_no_model_names_is_dropped(model: type[Stored]):
    answer = model.model_validate(_with_a_later_column(ROWS[model]))
    assert "a_later_column" not in answer.model_dump_json()
    # The row itself, without the column, answers exactly as before: nothing named was lost.
    assert answer.model_dump_json() == model.model_validate(ROWS[model]).model_dump_json()


def _extra_allowed(path: Path) -> list[int]:
    """Lines where a module lets a model take fields it does not name: `extra="allow"` as a keyword
    (ConfigDict(...), a class keyword) or a config dict's key."""
    tree = parse(path)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extra" and getattr(node.value, "value", None) == "allow":
            lines.append(node.value.lineno)
        elif isinstance(node, ast.Dict):
            lines += [v.lineno for k, v in zip(node.keys, node.values, strict=True)
                      if getattr(k, "value", None) == "extra" and getattr(v, "value", None) == "allow"]
    return sorted(lines)


def test_no_api_model_takes_fields_it_does_not_name():
    api = Path(responses.__file__).parent
    found = [f"{path.relative_to(api.parent)}:{line}" for path in sorted(api.rglob("*.py"))
             for line in _extra_allowed(path)]
    assert found == []


def test_the_extra_rule_sees_each_spelling(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text("class A(BaseModel):\n    model_config = ConfigDict(extra='allow')\n"
                     "class B(BaseModel, extra='allow'):\n    pass\n"
                     "class C(BaseModel):\n    model_config = {'extra': 'allow'}\n"
                     "class D(BaseModel):\n    model_config = ConfigDict(extra='forbid')\n")
    assert _extra_allowed(probe) == [2, 3, 6]

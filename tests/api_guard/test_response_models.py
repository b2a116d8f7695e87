"""Every route says what it answers: a pydantic response model, or (pages, files, metrics, empty
answers) an explicit non-JSON `response_class` with `response_model=None`. So the OpenAPI schema
shows each answer's shape and FastAPI checks each answer against it; a new route that returns a bare
dict fails here. Like test_auth_matrix, it walks the real app's routes, so none can be missed."""

from __future__ import annotations

import types
import typing
from datetime import UTC, datetime

from fastapi.datastructures import DefaultPlaceholder
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel

from api.app import create_app
from api.auth import TokenTable
from api.responses import ArtifactSummary
from wingsmith.config import Settings


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
    not pydantic's "Z"), and a column the model does not name still passes through."""
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    row = {"id": "acme/m@" + "0" * 40, "repo_id": "acme/m", "revision": "main", "sha": "0" * 40, "state": "draft",
           "workflow_id": "artifact/acme/m@" + "0" * 40, "requested_by": "ada", "superseded_by": None,
           "created_at": at, "updated_at": at, "draft_version": 1, "a_later_column": at}
    dumped = ArtifactSummary.model_validate(row).model_dump(mode="json")
    assert dumped["created_at"] == at.isoformat() == "2026-01-02T03:04:05.678901+00:00"
    assert dumped["a_later_column"] == at.isoformat()

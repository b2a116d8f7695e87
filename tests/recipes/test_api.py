from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.auth import TokenTable
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.config import Settings

TOKENS = {"view-token": {"name": "vera", "roles": ["viewer"]}}
AUTH = {"Authorization": "Bearer view-token"}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    settings = Settings(home=tmp_path_factory.mktemp("home"), log_format="json")
    app = create_app(settings, tokens=TokenTable.from_json(json.dumps(TOKENS)))
    return TestClient(app)


def test_list_recipes(client):
    response = client.get("/v1/recipes", headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert body["catalog_version"] == load_catalog().version
    k3 = next(r for r in body["recipes"] if r["recipe"] == "moonshotai/Kimi-K3")
    assert k3["checkpoints"] == ["moonshotai/Kimi-K3", "RedHatAI/Kimi-K3-NVFP4"]
    assert len(body["recipes"]) == len(load_catalog().recipes) > 100


def test_recipe_evidence_with_dynamo_entries(client):
    response = client.get("/v1/recipes/redhatai/kimi-k3-nvfp4", headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert body["evidence"]["recipe"] == "moonshotai/Kimi-K3"
    assert body["evidence"]["matched_variant"] == "nvfp4"
    assert {v["name"]: v["vram_minimum_gb"] for v in body["evidence"]["variants"]} == {"default": 1680, "nvfp4": 1650}
    # Kimi-K3's four vLLM graphs (aggregated and disaggregated, GB200 and GB300) all cap at 256.
    assert [e["max_concurrency"]["value"] for e in body["dynamo"]] == [256] * 4


def test_unknown_recipe_is_404_in_the_error_shape(client):
    response = client.get("/v1/recipes/moonshotai/Kimi-K9", headers=AUTH)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "moonshotai/Kimi-K9" in response.json()["error"]["message"]


def test_viewer_role_required(client):
    assert client.get("/v1/recipes").status_code == 401
    assert client.get("/v1/recipes/moonshotai/Kimi-K3", headers={"Authorization": "Bearer nope"}).status_code == 401

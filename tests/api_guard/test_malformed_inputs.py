"""Malformed inputs from outside the request: a model's config.json on the Hub and the plane's own
settings. Each is refused (or, for sizing, reported) naming the file or variable and the field.

Malformed vLLM recipes are covered where the catalog is built (tests/recipes/test_import.py: a YAML
syntax error by line, a wrong type, a missing field and an unknown strategy, each by file and field).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import httpx
import pytest
import pytest_asyncio
from pydantic import ValidationError

from api.app import create_app
from api.auth import TokenTable
from sim.hub import start_hub_server
from sim.hub.snapshot import load_snapshot
from tests.api_guard.conftest import TOKENS, as_
from wingsmith.domain.config import Settings

BASE = "Qwen/Qwen3-8B"
# (repo, change to the base model's config.json, words the answer must carry): within the config's schema,
# but not what sizing needs, so the proposal is made and says why it is not sized.
WRONG_FIELDS = [
    ("acme/no-layers", {"num_hidden_layers": None}, ["num_hidden_layers"]),
]
# Outside the schema (wingsmith/domain/hub/config_schema.py): refused, naming the field and the bound (issue 46).
OUT_OF_SCHEMA = [
    ("acme/layers-as-words", {"num_hidden_layers": "thirty-six"}, ["num_hidden_layers", "thirty-six", "whole number"]),
    ("acme/negative-layers", {"num_hidden_layers": -3}, ["num_hidden_layers", "greater than or equal to 1"]),
]

# (repo, the whole config.json, words the refusal must carry)
BROKEN_FILES = [
    ("acme/config-not-json", "{not json", ["config.json is not valid JSON", "line 1 column 2"]),
    ("acme/config-a-list", '["a", "list"]', ["config.json is not a JSON object"]),
]


def _with_config(model: dict, repo: str, text: str) -> dict:
    out = copy.deepcopy(model)
    out["id"] = repo
    for f in out["files"]:
        if f["path"] == "config.json":
            f.update(content=text, size=len(text.encode()), blob_id=f"{abs(hash(text)):040x}"[:40])
    return out


@pytest.fixture(scope="module")
def broken_hub():
    """The offline Hub, plus copies of Qwen3-8B whose config.json has one field wrong."""
    snapshot = load_snapshot()
    base = snapshot["models"][BASE]
    config = json.loads(next(f for f in base["files"] if f["path"] == "config.json")["content"])
    for repo, change, _ in WRONG_FIELDS + OUT_OF_SCHEMA:
        snapshot["models"][repo] = _with_config(base, repo, json.dumps({**config, **change}))
    for repo, text, _ in BROKEN_FILES:
        snapshot["models"][repo] = _with_config(base, repo, text)
    handle = start_hub_server(snapshot=snapshot)
    yield handle
    handle.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def resolve_api(broken_hub, tmp_path):
    """Resolving writes nothing, so this app needs neither Postgres nor Temporal."""
    settings = Settings(home=tmp_path / "home", hf_endpoint=broken_hub.url, auth_tokens=json.dumps(TOKENS),
                        log_format="json", log_level="WARNING")
    app = create_app(settings, tokens=TokenTable.from_json(settings.auth_tokens))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


async def _resolve(api, repo: str) -> httpx.Response:
    return await api.get("/v1/artifacts/resolve", params={"source": f"hf:{repo}"}, headers=as_("tok-vic"))


@pytest.mark.parametrize("repo, change, words", WRONG_FIELDS, ids=[w[0] for w in WRONG_FIELDS])
async def test_config_field_of_the_wrong_kind_is_named_in_the_sizing(resolve_api, repo, change, words):
    """A proposal is still made (it writes nothing and shows the facts), but it cannot be sized, and
    says which config field is why."""
    r = await _resolve(resolve_api, repo)
    assert r.status_code == 200, r.text
    sizing = r.json()["sizing"]
    notes = [s["note"] for s in sizing["sizing"] if s["report"] is None]
    assert notes and all(all(w in n for w in words) for n in notes), notes
    assert any(all(w in warning for w in words) for warning in sizing["warnings"])


@pytest.mark.parametrize("repo, change, words", OUT_OF_SCHEMA, ids=[w[0] for w in OUT_OF_SCHEMA])
async def test_config_field_outside_the_schema_is_refused_naming_it(resolve_api, repo, change, words):
    r = await _resolve(resolve_api, repo)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_config" and all(w in error["message"] for w in words), error
    assert error["details"]["field"] == "num_hidden_layers" and error["details"]["retryable"] is False


@pytest.mark.parametrize("repo, text, words", BROKEN_FILES, ids=[b[0] for b in BROKEN_FILES])
async def test_config_json_that_is_not_an_object_is_refused(resolve_api, repo, text, words):
    r = await _resolve(resolve_api, repo)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "not_a_model" and all(w in error["message"] for w in words), error
    assert error["details"]["repo_id"] == repo and error["details"]["retryable"] is False


# --- settings -----------------------------------------------------------------------------------------

SECRET = "tok-s3cret-never-echoed"


@pytest.mark.parametrize("raw, words", [
    ("{not json", ["WINGSMITH_AUTH_TOKENS is not valid JSON", "line 1 column 2"]),
    ('["a list"]', ["WINGSMITH_AUTH_TOKENS must be a JSON object"]),
    (json.dumps({SECRET: {"roles": ["admin"]}}), ["entry #1", "needs a name and roles"]),
    (json.dumps({"tok-a": {"name": "a", "roles": ["viewer"]}, SECRET: {"name": "b", "roles": ["root"]}}),
     ["entry #2", "unknown: ['root']"]),
    (json.dumps({SECRET: {"name": "b", "roles": []}}), ["entry #1", "viewer, operator, approver, admin"]),
])
def test_bad_auth_tokens_setting_is_named_without_echoing_a_token(raw, words):
    with pytest.raises(ValueError) as caught:
        create_app(Settings(auth_tokens=raw, log_format="json"))
    message = str(caught.value)
    assert all(w in message for w in words), message
    assert SECRET not in message


def test_the_api_process_refuses_to_start_on_bad_auth_tokens(tmp_path):
    env = {**os.environ, "WINGSMITH_AUTH_TOKENS": json.dumps({SECRET: {"name": "x", "roles": ["root"]}}),
           "WINGSMITH_HOME": str(tmp_path), "WINGSMITH_LOG_FORMAT": "json"}
    done = subprocess.run([sys.executable, "-c", "import api.main"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "WINGSMITH_AUTH_TOKENS entry #1" in last and "root" in last, done.stderr[-500:]
    assert SECRET not in done.stderr + done.stdout


@pytest.mark.parametrize("variable, value, field", [
    ("WINGSMITH_API_PORT", "eighty", "api_port"),
    ("WINGSMITH_GATEWAY", "nginx", "gateway"),
    ("WINGSMITH_REVIEW_DEADLINE_SECONDS", "5", "review_deadline_seconds"),
])
def test_bad_setting_names_its_field(monkeypatch, variable, value, field):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert [e["loc"] for e in caught.value.errors()] == [(field,)]
    assert field in str(caught.value)

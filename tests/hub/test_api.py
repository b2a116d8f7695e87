"""GET /v1/artifacts/resolve through the app, against the offline Hub."""

import json
import logging

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.auth import TokenTable
from sim.hub import load_snapshot
from tests.hub.conftest import FAST_RETRY, TOKEN
from wingsmith.adapters.hub.resolver import Resolver
from wingsmith.domain.config import Settings

VIEWER, OPERATOR = "viewer-token-abc", "operator-token-xyz"
TOKENS = json.dumps({VIEWER: {"name": "vera", "roles": ["viewer"]},
                     OPERATOR: {"name": "otto", "roles": ["operator"]}})
SNAP = load_snapshot()["models"]


@pytest.fixture
def client(hub, token_env, tmp_path):
    settings = Settings(hf_endpoint=hub.url, hf_token_ref=token_env, home=tmp_path, database_url=None,
                        temporal_address=None)
    app = create_app(settings, tokens=TokenTable.from_json(TOKENS))
    with TestClient(app) as c:
        c.headers["Authorization"] = f"Bearer {VIEWER}"
        yield c


def _fast(client):
    """Swap in a resolver with short backoff so the retry-then-503 cases stay quick."""
    s = client.app.state.settings
    client.app.state.resolver = Resolver(s.hf_endpoint, s.hf_token_ref, s.home_dir / "hf-cache", retry=FAST_RETRY,
                                         timeout=0.3)


def test_resolve_kimi_k3(client, tmp_path):
    r = client.get("/v1/artifacts/resolve", params={"source": "hf:moonshotai/Kimi-K3"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["weight_bytes"] == 1_560_860_324_864 and body["weight_bytes_source"] == "safetensors_files"
    assert body["sha"] == SNAP["moonshotai/Kimi-K3"]["sha"] and body["revision"] == "main"
    assert body["architecture"] == "KimiLinearForCausalLM"
    assert body["config"]["model_type"] == "kimi_k3"
    # The proposal carries the recipe evidence and the plane's sizing of each variant.
    assert {v["name"]: v["vram_minimum_gb"] for v in body["evidence"]["variants"]} == {"default": 1680, "nvfp4": 1650}
    sized = {s["variant"]: s for s in body["sizing"]["sizing"]}
    assert sized["default"]["report"]["floor"]["ours_gb"] == 1874
    assert sized["nvfp4"]["weight"]["method"] == "derived"
    # Writes nothing but the Hub cache.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf-cache"]


def test_operator_may_resolve_and_anonymous_may_not(client):
    params = {"source": "Qwen/Qwen3-8B"}
    assert client.get("/v1/artifacts/resolve", params=params,
                      headers={"Authorization": f"Bearer {OPERATOR}"}).status_code == 200
    assert client.get("/v1/artifacts/resolve", params=params, headers={"Authorization": ""}).status_code == 401


@pytest.mark.parametrize("source,status,code,says", [
    ("hf:Kimi-K3", 422, "invalid_source", "must be <org>/<name>"),
    ("https://github.com/a/b", 422, "invalid_source", "not the Hugging Face Hub"),
    ("hf:nobody/nothing", 404, "repo_not_found", "no model nobody/nothing"),
    ("hf:Qwen/Qwen3-8B@v9", 404, "revision_not_found", "no revision 'v9'"),
])
def test_errors(client, source, status, code, says):
    r = client.get("/v1/artifacts/resolve", params={"source": source})
    assert r.status_code == status
    err = r.json()["error"]
    assert err["code"] == code and says in err["message"]


def test_missing_source_is_422(client):
    r = client.get("/v1/artifacts/resolve")
    assert r.status_code == 422 and "source" in r.json()["error"]["message"]


def test_gated_is_403_with_how_to_grant(client, hub):
    hub.faults.set("Qwen/Qwen3-8B", gated=True)
    r = client.get("/v1/artifacts/resolve", params={"source": "Qwen/Qwen3-8B"})
    assert r.status_code == 403
    err = r.json()["error"]
    assert err["code"] == "gated_repo"
    assert "accept the model's terms at https://huggingface.co/Qwen/Qwen3-8B" in err["message"]


def test_5xx_is_503_naming_the_cause(client, hub):
    _fast(client)
    hub.faults.set("Qwen/Qwen3-8B", server_errors=-1)
    r = client.get("/v1/artifacts/resolve", params={"source": "Qwen/Qwen3-8B"})
    assert r.status_code == 503
    err = r.json()["error"]
    assert err["code"] == "hub_unavailable" and "answered 500" in err["message"] and err["details"]["retryable"]


def test_timeout_is_503_naming_the_cause(client, hub):
    _fast(client)
    hub.faults.set("Qwen/Qwen3-8B", latency=0.6)
    r = client.get("/v1/artifacts/resolve", params={"source": "Qwen/Qwen3-8B"})
    assert r.status_code == 503 and "did not answer" in r.json()["error"]["message"]


def test_rate_limit_beyond_patience_is_503_with_retry_after(client, hub):
    hub.faults.set("Qwen/Qwen3-8B", rate_limited=-1, rate_limit_reset=900)
    r = client.get("/v1/artifacts/resolve", params={"source": "Qwen/Qwen3-8B"})
    assert r.status_code == 503 and r.headers["Retry-After"] == "900"
    assert r.json()["error"]["code"] == "hub_rate_limited"


def test_429_then_success(client, hub):
    hub.faults.set("openai/gpt-oss-120b", rate_limited=1, rate_limit_reset=1)
    r = client.get("/v1/artifacts/resolve", params={"source": "openai/gpt-oss-120b"})
    assert r.status_code == 200 and r.json()["sha"] == SNAP["openai/gpt-oss-120b"]["sha"]


def test_repeated_resolve_makes_no_hub_call(client, hub):
    params = {"source": "https://huggingface.co/deepseek-ai/DeepSeek-R1"}
    first = client.get("/v1/artifacts/resolve", params=params).json()
    calls = hub.request_count()
    assert client.get("/v1/artifacts/resolve", params=params).json() == first
    assert hub.request_count() == calls


def test_token_never_in_responses_or_logs(client, hub, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    bodies = [client.get("/v1/artifacts/resolve", params={"source": "meta-llama/Llama-3.1-8B"}).text]
    hub.faults.set("meta-llama/Llama-3.3-70B-Instruct", gated=True)
    bodies.append(client.get("/v1/artifacts/resolve", params={"source": "meta-llama/Llama-3.3-70B-Instruct"}).text)
    bodies.append(client.get("/v1/artifacts/resolve", params={"source": "nobody/nothing"}).text)
    out = capsys.readouterr()
    assert json.loads(bodies[0])["gated"] is True
    assert TOKEN not in "\n".join(bodies + [caplog.text, out.out, out.err])


def test_cached_resolve_answers_on_the_event_loop_alone(client, hub, monkeypatch):
    # Warm: the first answer goes through the Hub and the thread pool; the repeat may use neither.
    first = client.get("/v1/artifacts/resolve", params={"source": "openai/gpt-oss-20b"})
    assert first.status_code == 200
    calls = hub.request_count()

    def no_threads(*_args, **_kwargs):
        raise AssertionError("the cached resolve path went to the thread pool")
    monkeypatch.setattr("api.services.proposals.run_in_threadpool", no_threads)
    again = client.get("/v1/artifacts/resolve", params={"source": "hf:openai/gpt-oss-20b"})
    assert again.status_code == 200 and again.headers["content-type"] == "application/json"
    assert again.json() == first.json() and hub.request_count() == calls


def test_each_revision_naming_a_commit_gets_its_own_name_back(client):
    by_branch = client.get("/v1/artifacts/resolve", params={"source": "openai/gpt-oss-20b"}).json()
    sha = by_branch["sha"]
    by_sha = client.get("/v1/artifacts/resolve", params={"source": f"openai/gpt-oss-20b@{sha}"}).json()
    assert (by_branch["revision"], by_sha["revision"]) == ("main", sha)
    assert {k: v for k, v in by_sha.items() if k != "revision"} == {k: v for k, v in by_branch.items()
                                                                     if k != "revision"}


def test_a_client_that_accepts_gzip_gets_the_cached_answer_compressed(client):
    params = {"source": "openai/gpt-oss-120b"}
    plain = client.get("/v1/artifacts/resolve", params=params, headers={"Accept-Encoding": "identity"})
    zipped = client.get("/v1/artifacts/resolve", params=params, headers={"Accept-Encoding": "gzip"})
    assert plain.headers.get("content-encoding") is None and zipped.headers["content-encoding"] == "gzip"
    assert zipped.json() == plain.json()  # the client decompresses
    assert int(zipped.headers["content-length"]) < int(plain.headers["content-length"]) / 3


def _solving_refused(*_args, **_kwargs):
    raise AssertionError("a cached resolve went through FastAPI's dependency and parameter machinery")


def test_a_cached_answer_skips_fastapis_machinery_and_is_the_same_answer(client, monkeypatch):
    params = {"source": "hf:openai/gpt-oss-20b"}
    answers = {}
    for encoding in ("gzip", "identity"):  # the first through the route as declared: it is not cached yet
        answers[encoding] = client.get("/v1/artifacts/resolve", params=params, headers={"Accept-Encoding": encoding})
    monkeypatch.setattr("fastapi.routing.solve_dependencies", _solving_refused)
    for encoding, declared in answers.items():
        cached = client.get("/v1/artifacts/resolve", params=params, headers={"Accept-Encoding": encoding})
        assert cached.status_code == declared.status_code == 200
        assert cached.content == declared.content and cached.headers == declared.headers


@pytest.mark.parametrize("authorization", ["", "Bearer not-a-token", f"Basic {VIEWER}"])
def test_a_cached_answer_is_refused_exactly_as_an_uncached_one(client, monkeypatch, authorization):
    assert client.get("/v1/artifacts/resolve", params={"source": "openai/gpt-oss-20b"}).status_code == 200
    refused = {source: client.get("/v1/artifacts/resolve", params={"source": source},
                                  headers={"Authorization": authorization})
               for source in ("openai/gpt-oss-20b", "openai/gpt-oss-120b")}  # cached, and not
    cached, uncached = refused.values()
    assert cached.status_code == uncached.status_code == 401
    assert cached.content == uncached.content and cached.headers == uncached.headers
    assert cached.json()["error"]["code"] == "unauthenticated"
    # Refused before the cache is looked at, without FastAPI's machinery.
    monkeypatch.setattr("fastapi.routing.solve_dependencies", _solving_refused)
    again = client.get("/v1/artifacts/resolve", params={"source": "openai/gpt-oss-20b"},
                       headers={"Authorization": authorization})
    assert again.status_code == 401 and again.content == cached.content

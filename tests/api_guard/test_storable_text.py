"""Every string the API takes can be stored: NUL and lone surrogates are a 422 naming the field,
sent as raw JSON the way a hostile client sends them (a JSON escape "\\ud800" is valid JSON, and
Python's json module turns it into a lone surrogate before any model sees it); free text has a
maximum well under Temporal's and Kubernetes' own limits."""

from __future__ import annotations

import json

import pytest

from tests.api_guard.conftest import as_
from tests.api_guard.test_schema_fuzz import error_shape_problem

WORKLOAD = {"artifact_id": "acme/model@" + "a" * 40, "hardware": "h200", "name": "wl-text"}
PLAN = {"hardware": "h200", "gpus_per_node": 8, "replicas": 1}
SURROGATE = "\\ud800"  # as it appears on the wire: a JSON escape


def raw(template: str, poison: str) -> bytes:
    """A JSON body as bytes, with `poison` spliced in verbatim (so escapes stay escapes)."""
    return template.replace("POISON", poison).encode()


def assert_refused(response, field: str, what: str) -> None:
    assert response.status_code == 422, response.text
    body = json.loads(response.content)  # ASCII JSON, whatever was echoed
    assert error_shape_problem(422, response.headers["content-type"], body) is None, body
    message = body["error"]["message"]
    assert field in message and what in message, message


@pytest.mark.parametrize("poison, what", [("\\u0000", "NUL"), (SURROGATE, "surrogate")])
@pytest.mark.parametrize("path, token, template, field", [
    ("/v1/workloads", "tok-olga",
     json.dumps({**WORKLOAD, "constraints": {"regions": ["eu-POISON"]}}), "constraints.regions"),
    ("/v1/workloads", "tok-olga",
     json.dumps({**WORKLOAD, "constraints": {"required_labels": {"zone": "aPOISON"}}}), "constraints.required_labels"),
    ("/v1/workloads", "tok-olga",
     json.dumps({**WORKLOAD, "constraints": {"required_labels": {"zoPOISONne": "a"}}}), "constraints.required_labels"),
    ("/v1/placements/dry-run", "tok-vic",
     json.dumps({"plan": {**PLAN, "constraints": {"regions": ["POISON"]}}}), "plan.constraints.regions"),
    ("/v1/placements/dry-run", "tok-vic", json.dumps({"plan": PLAN, "clusters": ["eastPOISON"]}), "clusters"),
    ("/v1/endpoints", "tok-olga", json.dumps({"name": "kimi", "workloads": ["wlPOISON"]}), "workloads"),
    ("/v1/artifacts", "tok-olga", json.dumps({"source": "hf:acme/modelPOISON"}), "source"),
    ("/v1/artifacts/acme/model@abc/review", "tok-ana",
     json.dumps({"decision": "approve", "draft_version": 1, "selections": {"variant": "POISON"}}),
     "selections.variant"),
    ("/v1/clusters", "tok-ada",
     json.dumps({"name": "east", "kubeconfig": "env:KUBECONFIG_K", "region": "euPOISON"}), "region"),
])
async def test_unstorable_text_is_a_422_naming_the_field(api, path, token, template, field, poison, what):
    r = await api.post(path, content=raw(template, poison),
                       headers={**as_(token), "content-type": "application/json"})
    assert_refused(r, field, what)


@pytest.mark.parametrize("name, problem", [
    ("k" * 300_000, "at most 256"),     # would end up in a DGD annotation, refused above 256 KB
    ("k" * 257, "at most 256"),
    ("kimi\nk3", "pattern"),            # would split the name at the frontend
    ("kimi k3", "pattern"),
    ("kimi\x00", "pattern"),
    ("", "at least 1"),
])
async def test_served_model_name_is_a_model_id(api, name, problem):
    r = await api.post("/v1/workloads", json={**WORKLOAD, "served_model_name": name}, headers=as_("tok-olga"))
    assert_refused(r, "served_model_name", problem)


async def test_a_name_that_would_reach_temporals_limit_never_reaches_the_model(api):
    """3 MB would reach Temporal's 4 MB gRPC limit; the body cap (wingsmith/adapters/body_limit.py, 1 MB)
    answers first."""
    r = await api.post("/v1/workloads", json={**WORKLOAD, "served_model_name": "k" * 3_000_000},
                       headers=as_("tok-olga"))
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large", r.text[:300]


@pytest.mark.parametrize("name", ["moonshotai/Kimi-K3", "kimi-k3", "org/model_v1.5:fp8", "k" * 256])
async def test_model_ids_pass_the_served_name_check(api, name):
    r = await api.post("/v1/workloads", json={**WORKLOAD, "served_model_name": name}, headers=as_("tok-olga"))
    # Past validation: the artifact is unknown here, which is the next thing checked.
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_workload", r.text


@pytest.mark.parametrize("path, token, body, field", [
    ("/v1/artifacts/acme/model@abc/review", "tok-ana", {"decision": "approve", "draft_version": 1,
                                                        "comment": "c" * 4001}, "comment"),
    ("/v1/artifacts", "tok-olga", {"source": "hf:" + "a" * 600}, "source"),
    ("/v1/workloads", "tok-olga", {**WORKLOAD, "constraints": {"regions": ["r" * 64]}}, "constraints.regions"),
    ("/v1/workloads", "tok-olga", {**WORKLOAD, "constraints": {"regions": ["r"] * 65}}, "constraints.regions"),
    ("/v1/workloads", "tok-olga", {**WORKLOAD, "features": ["f" * 254]}, "features"),
])
async def test_free_text_has_a_maximum(api, path, token, body, field):
    r = await api.post(path, json=body, headers=as_(token))
    assert_refused(r, field, "at most")


async def test_an_echoed_surrogate_does_not_break_the_error_handler(api):
    # The source is echoed in the error's details: the answer must still be JSON, not a plain-text 500.
    r = await api.post("/v1/artifacts", content=b'{"source": "not a source \\udfff"}',
                       headers={**as_("tok-olga"), "content-type": "application/json"})
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/json")
    json.loads(r.content)

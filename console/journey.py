"""The four steps from a model to an endpoint, as the exact API calls a person can paste.

The workload and endpoint bodies follow the API of #9/#10; keep them equal to those routes' request
models (the console's tests check the resolve and register calls against the running API)."""

from __future__ import annotations

import json
import shlex

from pydantic import BaseModel

AUTH = '-H "Authorization: Bearer $WINGSMITH_TOKEN"'
JSON = "-H 'Content-Type: application/json'"


class Step(BaseModel):
    title: str
    words: str
    calls: list[str]


_VARS = ("$SHA",)


def _body(body: dict) -> str:
    # Single-quoted JSON, reopened around the shell variables so they still expand.
    quoted = shlex.quote(json.dumps(body))
    for var in _VARS:
        quoted = quoted.replace(var, f"'\"{var}\"'")
    return quoted


def _post(base: str, path: str, body: dict) -> str:
    return f'curl -sS -X POST {AUTH} {JSON} \\\n  -d {_body(body)} \\\n  "{base}{path}"'


def _get(base: str, path: str) -> str:
    return f'curl -sS {AUTH} \\\n  "{base}{path}"'


def workload_body(hf_id: str, *, hardware: str, layout: str) -> dict:
    """`POST /v1/workloads` for this model (a `wingsmith.domain.workloads.WorkloadRequest`), named after the model
    so the endpoint step can refer to it."""
    return {"artifact_id": f"{hf_id}@$SHA", "name": served_name(hf_id), "engine": "vllm", "hardware": hardware,
            "layout": layout, "replicas": 1}


def served_name(hf_id: str) -> str:
    return hf_id.rsplit("/", 1)[-1].lower().replace(".", "-").replace("_", "-")[:40]


def chat_call(gateway_url: str, model: str) -> str:
    """A chat completion through the gateway, which clients call without the plane's token: the same
    call the endpoint page offers."""
    from console.endpoints import chat_curl, gateway_base  # the endpoint pages import this module
    return chat_curl(gateway_base(gateway_url), model)


def journey_steps(base_url: str, hf_id: str, *, hardware: str, gpus: int, layout: str,
                  gateway_url: str | None = None) -> list[Step]:
    base = base_url.rstrip("/")
    artifact = f"{hf_id}@$SHA"
    art_path = f"/v1/artifacts/{artifact}"
    return [
        Step(title="1. Resolve", words=(
            "Ask the plane what it would register: the exact commit, licence, weight size, the recipe "
            "evidence and the plane's own sizing. Nothing is written. The second line keeps the commit (sha) "
            "in $SHA for the next steps."),
            calls=[_get(base, f"/v1/artifacts/resolve?source=hf:{hf_id}"),
                   "SHA=$(" + _get(base, f"/v1/artifacts/resolve?source=hf:{hf_id}")
                   + " \\\n  | python3 -c 'import json, sys; print(json.load(sys.stdin)[\"sha\"])')"]),
        Step(title="2. Draft (register, then review)", words=(
            "Register the model at that commit (operator role). The plane builds a draft with the evidence "
            "and its sizing and waits for a person. An approver reads the draft (here in the console, or "
            "with the GET below) and approves the draft version they read."),
            calls=[_post(base, "/v1/artifacts", {"source": f"hf:{hf_id}"}),
                   _get(base, art_path),
                   _post(base, f"{art_path}/review",
                         {"decision": "approve", "draft_version": 1, "comment": "floors and layouts checked"})]),
        Step(title="3. Workload", words=(
            f"Run the approved artifact: engine, hardware ({gpus} × {hardware}), layout ({layout}) and how many "
            "copies. The plane checks it against the approved draft, picks the clusters and rolls it out; the "
            "GET shows each cluster's state."),
            calls=[_post(base, "/v1/workloads", workload_body(hf_id, hardware=hardware, layout=layout)),
                   _get(base, f"/v1/workloads/{served_name(hf_id)}")]),
        Step(title="4. Endpoint", words=(
            "Give the workload one model name for clients. The gateway sends requests to every cluster "
            "where it is ready."),
            calls=[_post(base, "/v1/endpoints", {"name": served_name(hf_id), "workloads": [served_name(hf_id)]})]),
    ] + ([Step(title="5. Call it", words=(
            "Any OpenAI-compatible client sends the endpoint's model name to the gateway (not to the plane's API, "
            "so no plane token)."), calls=[chat_call(gateway_url, served_name(hf_id))])] if gateway_url else [])

"""A chat to an endpoint answers with the model that served it (issue 52: a chat to endpoint `red-ep` answered
`"model": "red-kimi"`). That is the documented behaviour (docs/design-choices.md, "An answer names the
model that served it"), pinned here over real HTTP with the OpenAI SDK: the client asks for the endpoint's
name, the backend is asked for the name it serves, and the answer and every streamed chunk carry that name,
as OpenAI's API answers an alias with the dated model that served it. Envoy AI Gateway is rendered to do the
same (its `modelNameOverride`), so both data planes answer alike."""

from __future__ import annotations

from pathlib import Path

import openai

from gateway import BACKEND_HEADER
from tests.gateway.conftest import RunningGateway, ScriptedBackend
from wingsmith.adapters.gateway.envoy import render_envoy_resources
from wingsmith.domain.gateway import Backend, EndpointRoutes

DOCS = Path(__file__).resolve().parents[2] / "docs" / "design-choices.md"
ENDPOINT, SERVED = "red-ep", "red-kimi"
MESSAGES = [{"role": "user", "content": "Say hello"}]


def _routes(url: str) -> EndpointRoutes:
    return EndpointRoutes(model_name=ENDPOINT, backends=[Backend(
        id="sim-alpha/red-kimi", cluster="sim-alpha", workload_id="red-kimi", url=url, weight=1,
        served_model=SERVED)])


def test_the_answer_names_the_served_model_not_the_endpoint(gateway: RunningGateway) -> None:
    backend = ScriptedBackend("alpha", models=(SERVED,))
    try:
        gateway.client.set_routes(_routes(backend.url))
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(model=ENDPOINT, messages=MESSAGES)
        answer = raw.parse()
        assert answer.model == SERVED, "the answer names what served it"
        assert answer.choices[0].message.content == f"reply from alpha for {SERVED}", "asked under its own name"
        assert raw.headers[BACKEND_HEADER] == "sim-alpha/red-kimi"
        chunks = list(client.chat.completions.create(model=ENDPOINT, messages=MESSAGES, stream=True))
        assert chunks and {c.model for c in chunks} == {SERVED}
    finally:
        backend.stop()


def test_envoy_is_rendered_to_answer_alike_and_the_docs_say_why() -> None:
    rendered = render_envoy_resources(_routes("http://10.0.0.7:8000"), namespace="gw", gateway_name="eg")
    refs = [ref for obj in rendered if obj["kind"] == "AIGatewayRoute"
            for rule in obj["spec"]["rules"] for ref in rule["backendRefs"]]
    assert [ref.get("modelNameOverride") for ref in refs] == [SERVED]
    words = " ".join(DOCS.read_text().split())
    assert "**An answer names the model that served it.**" in words
    assert "gpt-4o-2024-08-06" in words and "modelNameOverride" in words

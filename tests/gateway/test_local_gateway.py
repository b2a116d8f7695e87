"""The local gateway over real HTTP: routing by weight, streaming, failover, draining, the admin API."""

from __future__ import annotations

import collections
import re
import threading
import time

import httpx
import openai
import pytest

from gateway import BACKEND_HEADER
from tests.gateway.conftest import MODEL, RunningGateway, ScriptedBackend
from wingsmith.adapters.gateway import GatewayError, LocalGatewayClient
from wingsmith.adapters.http_tls import default_tls
from wingsmith.domain.gateway import Backend, EndpointRoutes

MESSAGES = [{"role": "user", "content": "Say hello"}]


def routes(*pairs: tuple[ScriptedBackend | str, int], model: str = MODEL,
           served_model: str | None = None) -> EndpointRoutes:
    out = []
    for i, (backend, weight) in enumerate(pairs):
        url = backend if isinstance(backend, str) else backend.url
        name = f"b{i}" if isinstance(backend, str) else backend.name
        out.append(Backend(id=f"sim-{name}/{model}", cluster=f"sim-{name}", workload_id=f"wl-{i}", url=url,
                           weight=weight, served_model=served_model))
    return EndpointRoutes(model_name=model, backends=out)


def chat(gateway: RunningGateway, **extra) -> httpx.Response:
    return httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": MODEL, "messages": MESSAGES, **extra},
                      timeout=10, verify=default_tls())


def wait_until(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


# ---- routing ---------------------------------------------------------------------------------------

def test_requests_follow_the_weights(gateway, backends):
    alpha, beta = backends
    gateway.client.set_routes(routes((alpha, 3), (beta, 1)))
    answered = collections.Counter(chat(gateway).headers[BACKEND_HEADER] for _ in range(12))
    assert answered == {f"sim-alpha/{MODEL}": 9, f"sim-beta/{MODEL}": 3}
    assert (alpha.completions, beta.completions) == (9, 3)


def test_a_backend_gets_only_the_request_headers_meant_for_it(gateway, backends):
    gateway.client.set_routes(routes((backends[0], 1)))
    sent = [("x-request-id", "first"), ("x-request-id", "second"), ("authorization", "Bearer client-key"),
            ("cookie", "session=1"), ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            ("accept", "application/json"), ("x-custom", "kept-out")]
    r = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": MODEL, "messages": MESSAGES},
                   headers=sent, timeout=10)
    assert r.status_code == 200
    got = [(k.decode(), v.decode()) for k, v in backends[0].last_headers]
    names = [k for k, _ in got]
    assert ("x-request-id", "first") in got and names.count("x-request-id") == 1  # the first, once
    # The trace context goes on: the client's own, or (when the gateway traces) the gateway's span's.
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-3]", dict(got)["traceparent"])
    assert dict(got)["accept"] == "application/json"
    assert dict(got)["content-type"] == "application/json"
    assert not {"authorization", "cookie", "x-custom"} & set(names)


def test_models_lists_the_routed_endpoints(gateway, backends):
    gateway.client.set_routes(routes((backends[0], 1)))
    gateway.client.set_routes(routes((backends[1], 1), model="other-model"))
    body = httpx.get(f"{gateway.url}/v1/models").json()
    assert [m["id"] for m in body["data"]] == [MODEL, "other-model"]
    assert httpx.get(f"{gateway.url}/v1/models/{MODEL}").json()["id"] == MODEL
    assert httpx.get(f"{gateway.url}/healthz").json() == {"status": "ok", "endpoints": 2}


def test_unknown_model_is_404_in_openai_shape(gateway, backends):
    gateway.client.set_routes(routes((backends[0], 1)))
    resp = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": "nope", "messages": MESSAGES})
    assert resp.status_code == 404
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", "model", "model_not_found")
    assert "nope" in error["message"]
    assert backends[0].completions == 0
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="nope", messages=MESSAGES)
    assert caught.value.code == "model_not_found"
    assert httpx.get(f"{gateway.url}/v1/models/nope").status_code == 404


def test_bad_requests_get_openai_errors(gateway, backends):
    gateway.client.set_routes(routes((backends[0], 1)))
    not_json = httpx.post(f"{gateway.url}/v1/chat/completions", content=b"{",
                          headers={"content-type": "application/json"})
    assert (not_json.status_code, not_json.json()["error"]["code"]) == (400, "invalid_json")
    nested = httpx.post(f"{gateway.url}/v1/chat/completions", content=b"[" * 100_000 + b"]" * 100_000,
                        headers={"content-type": "application/json"})  # deeper than the parser goes
    assert (nested.status_code, nested.json()["error"]["code"]) == (400, "invalid_json")
    no_model = httpx.post(f"{gateway.url}/v1/chat/completions", json={"messages": MESSAGES})
    assert (no_model.status_code, no_model.json()["error"]["param"]) == (400, "model")
    unknown_url = httpx.get(f"{gateway.url}/v1/embeddings")
    assert unknown_url.status_code in (404, 405) and "error" in unknown_url.json()


def test_streaming_is_passed_through_as_it_arrives(gateway, backends):
    alpha = backends[0]
    alpha.chunk_delay = 0.3
    gateway.client.set_routes(routes((alpha, 1)))
    started = time.monotonic()
    arrivals = []
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", timeout=10,
                      json={"model": MODEL, "messages": MESSAGES, "stream": True}) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data:"):
                arrivals.append(time.monotonic() - started)
    # Five words, 0.3 s apart: a buffering proxy would deliver everything at once after ~1.5 s.
    assert len(arrivals) == 6
    assert arrivals[-1] - arrivals[0] > 1.2
    assert arrivals[2] - arrivals[0] > 0.45


def test_no_serving_backend_is_503(gateway, backends):
    gateway.client.set_routes(routes((backends[0], 0)))
    resp = chat(gateway)
    assert resp.status_code == 503
    assert resp.json()["error"]["code"] == "no_backend"
    assert backends[0].completions == 0


# ---- failures --------------------------------------------------------------------------------------

def test_a_failing_backend_costs_one_retried_request_and_no_client_error(gateway, backends):
    alpha, beta = backends
    gateway.client.set_routes(routes((alpha, 1), (beta, 1)))
    alpha.mode = "error"
    replies = [chat(gateway) for _ in range(10)]
    assert [r.status_code for r in replies] == [200] * 10
    assert {r.headers[BACKEND_HEADER] for r in replies} == {f"sim-beta/{MODEL}"}
    assert alpha.completions == 1  # the one request that failed, then answered by beta
    assert beta.completions == 10
    status = gateway.client.status(MODEL)
    alpha_status = next(b for b in status.backends if b.id == f"sim-alpha/{MODEL}")
    assert alpha_status.cooling_down and alpha_status.healthy is False
    # The failure that started the cool-down, or the latest failed probe of the same backend.
    assert alpha_status.failures == 1 and ("HTTP 500" in alpha_status.last_error or "probe" in alpha_status.last_error)

    # The background probe brings it back once its /v1/models answers again.
    alpha.mode = "ok"
    wait_until(lambda: not gateway.table.status(MODEL).backends[0].cooling_down)
    assert alpha.probes >= 1
    assert {chat(gateway).headers[BACKEND_HEADER] for _ in range(4)} == {f"sim-alpha/{MODEL}", f"sim-beta/{MODEL}"}


def test_a_retry_resends_the_request_to_a_backend_serving_another_name(gateway, backends):
    """A retried request is the client's request again, renamed for the backend that serves it (a
    regression: the failed answer's bytes once took the request's place and the retry crashed)."""
    alpha, beta = backends
    gateway.client.set_routes(routes((alpha, 1000), (beta, 1), served_model="acme/Served-Name"))
    alpha.mode = "error"
    reply = chat(gateway)
    assert reply.status_code == 200, reply.text
    assert reply.headers[BACKEND_HEADER] == f"sim-beta/{MODEL}"
    assert reply.json()["choices"][0]["message"]["content"].endswith("for acme/Served-Name")
    assert alpha.completions == 1


@pytest.mark.parametrize("failure", ["hang-up", "stopped"])
def test_connection_failures_move_traffic_too(gateway, backends, failure):
    alpha, beta = backends
    gateway.client.set_routes(routes((alpha, 1), (beta, 1)))
    if failure == "stopped":
        alpha.stop()
    else:
        alpha.mode = "hang-up"
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
    texts = [client.chat.completions.create(model=MODEL, messages=MESSAGES).choices[0].message.content
             for _ in range(6)]
    assert texts == [f"reply from beta for {MODEL}"] * 6
    assert alpha.completions <= 1
    assert gateway.client.status(MODEL).backends[0].cooling_down


def test_every_backend_failing_is_a_clear_error(gateway, backends):
    alpha, beta = backends
    alpha.mode = beta.mode = "error"
    gateway.client.set_routes(routes((alpha, 1), (beta, 1)))
    resp = chat(gateway)
    # Both tried once; the last backend's own answer is relayed.
    assert resp.status_code == 500
    assert (alpha.completions, beta.completions) == (1, 1)
    unreachable = routes(("http://127.0.0.1:9", 1), ("http://127.0.0.1:9/other", 1))
    gateway.client.set_routes(unreachable)
    resp = chat(gateway)
    assert resp.status_code == 502
    assert resp.json()["error"]["code"] == "backend_failed"


def test_removed_sim_frontend_moves_traffic_to_the_other_cluster(gateway, sim):
    east, west = sim.cluster("sim-east"), sim.cluster("sim-west")
    sim.frontends.publish("sim-east", "default", "kimi-east", [MODEL])
    sim.frontends.publish("sim-west", "default", "kimi-west", [MODEL])
    try:
        gateway.client.set_routes(routes((east.frontend_url("default", "kimi-east"), 1),
                                         (west.frontend_url("default", "kimi-west"), 1)))
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
        answers = [client.chat.completions.create(model=MODEL, messages=MESSAGES).choices[0].message.content
                   for _ in range(4)]
        first = {answer.split(" in ")[0] for answer in answers}
        assert first == {"Hello from kimi-east", "Hello from kimi-west"}
        sim.frontends.remove("sim-east", "default", "kimi-east")  # the east cluster stops serving
        after = [client.chat.completions.create(model=MODEL, messages=MESSAGES).choices[0].message.content
                 for _ in range(6)]
        assert all("on sim-west" in text for text in after)
        status = gateway.client.status(MODEL)
        assert status.backends[0].cooling_down and status.backends[0].failures == 1
    finally:
        sim.frontends.remove("sim-east", "default", "kimi-east")
        sim.frontends.remove("sim-west", "default", "kimi-west")


def test_a_stream_that_breaks_after_bytes_were_sent_is_not_hidden(gateway, backends):
    alpha, beta = backends
    alpha.mode = "break-mid-stream"
    gateway.client.set_routes(routes((alpha, 1), (beta, 1)))
    received: list[str] = []
    with pytest.raises(httpx.HTTPError):
        with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", timeout=10,
                          json={"model": MODEL, "messages": MESSAGES, "stream": True}) as resp:
            received.extend(line for line in resp.iter_lines() if line)
    # Bytes had reached the client, so no retry: the client sees the break, not a quiet truncation.
    assert "data: [DONE]" not in received
    assert (alpha.completions, beta.completions) == (1, 0)
    status = gateway.client.status(MODEL)
    assert status.backends[0].cooling_down and status.in_flight == 0


def test_a_client_that_goes_away_frees_its_slot(gateway, backends):
    alpha = backends[0]
    alpha.chunk_delay = 0.3
    gateway.client.set_routes(routes((alpha, 1)))
    with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", timeout=10,
                      json={"model": MODEL, "messages": MESSAGES, "stream": True}) as resp:
        lines = resp.iter_lines()  # held: dropping the iterator would already close the connection
        next(lines)
        assert gateway.client.status(MODEL).in_flight == 1
    wait_until(lambda: gateway.client.status(MODEL).in_flight == 0)
    assert not gateway.client.status(MODEL).backends[0].cooling_down
    # The gateway closed its backend connection too, so the generation stopped there: six words 0.3 s
    # apart would have reached [DONE] by now.
    time.sleep(2.0)
    assert alpha.streams_finished == 0


# ---- draining --------------------------------------------------------------------------------------

def test_draining_backend_gets_no_new_requests_and_finishes_in_flight(gateway, backends):
    alpha, beta = backends
    alpha.chunk_delay = 0.2
    gateway.client.set_routes(routes((alpha, 1), (beta, 1)))
    lines: list[str] = []

    def slow_stream() -> None:
        with httpx.stream("POST", f"{gateway.url}/v1/chat/completions", timeout=10,
                          json={"model": MODEL, "messages": MESSAGES, "stream": True}) as resp:
            lines.extend(line for line in resp.iter_lines() if line)

    reader = threading.Thread(target=slow_stream)
    reader.start()
    # In flight at the gateway, and arrived at alpha (the gateway counts it before alpha has read it).
    wait_until(lambda: gateway.client.status(MODEL).backends[0].in_flight == 1 and alpha.completions == 1)
    gateway.client.set_routes(routes((alpha, 0), (beta, 1)))  # drain alpha
    assert gateway.client.status(MODEL).in_flight == 1
    before = alpha.completions
    assert {chat(gateway).headers[BACKEND_HEADER] for _ in range(5)} == {f"sim-beta/{MODEL}"}
    assert alpha.completions == before
    assert gateway.client.wait_drained(MODEL, f"sim-alpha/{MODEL}", grace=5, poll=0.05)
    reader.join(timeout=5)
    assert lines[-1] == "data: [DONE]"  # the in-flight stream ran to its end
    assert gateway.client.status(MODEL).in_flight == 0


def test_wait_drained_gives_up_after_the_grace_period(gateway, backends):
    alpha = backends[0]
    alpha.chunk_delay = 0.5
    gateway.client.set_routes(routes((alpha, 1)))
    reader = threading.Thread(target=lambda: chat(gateway, stream=True))
    reader.start()
    wait_until(lambda: gateway.client.status(MODEL).in_flight == 1)
    started = time.monotonic()
    assert gateway.client.wait_drained(MODEL, f"sim-alpha/{MODEL}", grace=0.3, poll=0.05) is False
    assert 0.25 < time.monotonic() - started < 3
    reader.join(timeout=10)


# ---- openai client ---------------------------------------------------------------------------------

def test_openai_client_through_the_gateway_answered_by_both_clusters(gateway, sim):
    sim.frontends.publish("sim-east", "default", "kimi-a", [MODEL])
    sim.frontends.publish("sim-west", "default", "kimi-b", [MODEL])
    try:
        gateway.client.set_routes(routes((sim.cluster("sim-east").frontend_url("default", "kimi-a"), 1),
                                         (sim.cluster("sim-west").frontend_url("default", "kimi-b"), 1)))
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
        plain = [client.chat.completions.create(model=MODEL, messages=MESSAGES).choices[0].message.content
                 for _ in range(2)]
        streamed = []
        for _ in range(2):
            stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
            streamed.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
        # Same prompt, same deployment, same reply: the stream carries exactly the plain answer.
        assert sorted(plain) == sorted(streamed)
        assert {t.split(" on ")[1].split(",")[0] for t in plain} == {"sim-east", "sim-west"}
        text = client.completions.create(model=MODEL, prompt="Once upon a time").choices[0].text
        assert text.startswith("Hello from kimi-")
    finally:
        sim.frontends.remove("sim-east", "default", "kimi-a")
        sim.frontends.remove("sim-west", "default", "kimi-b")


# ---- admin API -------------------------------------------------------------------------------------

def test_admin_api_refuses_missing_and_wrong_tokens(gateway, tmp_path):
    url = f"{gateway.url}/admin/routes"
    missing = httpx.get(url)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "missing_token"
    wrong = httpx.get(url, headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "wrong_token"
    put = httpx.put(f"{url}/{MODEL}", json={"backends": []}, headers={"Authorization": "Basic abc"})
    assert put.status_code == 401
    assert gateway.table.get(MODEL) is None
    ok = httpx.get(url, headers={"Authorization": f"Bearer {gateway.token}"})
    assert ok.status_code == 200 and ok.json() == {"data": []}

    wrong_file = tmp_path / "wrong-token"
    wrong_file.write_text("another-token")
    with LocalGatewayClient(gateway.url, f"file:{wrong_file}") as bad:
        with pytest.raises(GatewayError) as caught:
            bad.get_routes()
    assert (caught.value.type, caught.value.retryable, caught.value.status) == ("GatewayUnauthorized", False, 401)
    assert "another-token" not in str(caught.value)
    with LocalGatewayClient(gateway.url, "WINGSMITH_TEST_UNSET_TOKEN") as unset:
        with pytest.raises(GatewayError) as caught:
            unset.get_routes()
    assert caught.value.type == "GatewayTokenUnavailable"


def test_admin_api_is_disabled_without_a_token_reference(tmp_path):
    from gateway import create_gateway_app
    from tests.gateway.conftest import Served
    served = Served(create_gateway_app(state_dir=None, admin_token_ref=None))
    try:
        resp = httpx.get(f"{served.url}/admin/routes", headers={"Authorization": "Bearer anything"})
        assert resp.status_code == 503 and resp.json()["error"]["code"] == "admin_disabled"
    finally:
        served.stop()


def test_admin_api_validates_routes(gateway, backends):
    auth = {"Authorization": f"Bearer {gateway.token}"}
    bad = httpx.put(f"{gateway.url}/admin/routes/{MODEL}", headers=auth, json={"backends": [
        {"id": "a", "cluster": "c", "workload_id": "w", "url": "ftp://x", "weight": -1}]})
    assert bad.status_code == 422
    message = bad.json()["error"]["message"]
    assert "backends.0.url" in message and "backends.0.weight" in message
    mismatch = httpx.put(f"{gateway.url}/admin/routes/{MODEL}", headers=auth, json={"model_name": "other"})
    assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == "model_name_mismatch"
    assert gateway.table.get(MODEL) is None


def test_set_get_delete_are_idempotent(gateway, backends):
    wanted = routes((backends[0], 2), (backends[1], 1))
    assert gateway.client.set_routes(wanted) == wanted
    assert gateway.client.set_routes(wanted) == wanted
    assert gateway.client.get_route(MODEL) == wanted
    assert gateway.client.get_routes() == [wanted]
    assert gateway.client.delete_routes(MODEL) is True
    assert gateway.client.delete_routes(MODEL) is False
    assert gateway.client.get_route(MODEL) is None
    assert gateway.client.status(MODEL) is None


def test_model_names_with_slashes(gateway, backends):
    name = "moonshotai/Kimi-K3"
    gateway.client.set_routes(EndpointRoutes(model_name=name, backends=[Backend(
        id="sim-alpha/kimi", cluster="sim-alpha", workload_id="w", url=backends[0].url, weight=1,
        served_model=MODEL)]))
    assert gateway.client.get_route(name).model_name == name
    resp = httpx.post(f"{gateway.url}/v1/chat/completions", json={"model": name, "messages": MESSAGES})
    # served_model: the backend is asked for the name it serves.
    assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"].endswith(f"for {MODEL}")
    assert gateway.client.delete_routes(name) is True


def test_routes_survive_a_gateway_restart(tmp_path, token_file, backends):
    first = RunningGateway(tmp_path / "state", token_file)
    wanted = routes((backends[0], 1), (backends[1], 0))
    first.client.set_routes(wanted)
    first.stop()
    second = RunningGateway(tmp_path / "state", token_file)
    try:
        assert second.client.get_route(MODEL) == wanted
        assert chat(second).headers[BACKEND_HEADER] == f"sim-alpha/{MODEL}"
    finally:
        second.stop()


def test_admin_token_is_never_logged(gateway, backends, caplog, capsys):
    caplog.set_level("DEBUG")
    gateway.client.set_routes(routes((backends[0], 1)))
    httpx.get(f"{gateway.url}/admin/routes", headers={"Authorization": "Bearer wrong-guess"})
    backends[0].mode = "error"
    chat(gateway)  # a failure is logged too
    out = capsys.readouterr()
    logged = caplog.text + out.out + out.err
    assert "gateway routes set" in logged and "cooling down" in logged  # the logs were captured
    assert gateway.token not in logged
    assert "wrong-guess" not in logged

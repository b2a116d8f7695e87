"""Bad input from the API's own OpenAPI schema: schemathesis generates valid and invalid requests for
every operation and sends them, as an admin, to the real app (real Postgres, real Temporal, offline
Hub). No answer may be a 5xx, and every 4xx must be the one error shape of api/errors.py with a
message that says what was wrong.

Side effects are real (an admin may register clusters, a valid source starts an artifact workflow)
and stay in this module's own database and Temporal namespace. No worker runs, so nothing started
here proceeds; routes that would wait on a workflow answer from Temporal's own not-found.

Besides what schemathesis draws, each case is sent again poisoned (NUL, lone surrogates, a 300 KB
string), with every list grown to thousands of items, and once per operation as a body past the size
cap: none of them may be a 5xx either.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from api.app import create_app
from api.auth import TokenTable
from tests.api_guard.conftest import as_
from wingsmith.domain.config import Settings

# Bounded so the whole module stays well under 90 s on 2 cores.
MAX_EXAMPLES = 50
# Words a framework says when nobody wrote a message: an answer made of one of them names nothing.
GENERIC = {"not found", "method not allowed", "request failed", "invalid request", "internal server error",
           "bad request", "unprocessable entity", "error"}
CODE = re.compile(r"^[a-z][a-z0-9_]*$")


# The schema the served app publishes, built at collection so each operation is a test of its own.
# (schemathesis' lazy `from_fixture` reaches into pytest internals that pytest 9 no longer has.)
schema = schemathesis.openapi.from_dict(
    create_app(Settings(auth_tokens="{}", log_format="json"), tokens=TokenTable({})).openapi())


def error_shape_problem(status: int, content_type: str, body) -> str | None:
    """What is wrong with a 4xx body, or None when it is the one error shape with a real message."""
    if not content_type.startswith("application/json"):
        return f"content-type {content_type!r}, not JSON"
    if not isinstance(body, dict) or set(body) != {"error"} or not isinstance(body["error"], dict):
        return f"body is not {{'error': {{...}}}}: {body!r}"
    error = body["error"]
    if not {"code", "message"} <= set(error) <= {"code", "message", "details"}:
        return f"error keys {sorted(error)} are not code, message[, details]"
    if not isinstance(error["code"], str) or not CODE.match(error["code"]):
        return f"error code {error['code']!r} is not a snake_case word"
    message = error["message"]
    if not isinstance(message, str) or not message.strip() or message.strip().lower() in GENERIC:
        return f"message {message!r} does not say what was wrong"
    if error["code"] == "invalid":
        # Validation errors list each problem; the message must name every field it complains about.
        details = error.get("details")
        if not isinstance(details, list) or not details:
            return "a validation error without its list of problems"
        unnamed = [p.get("field") for p in details if not p.get("field") or p["field"] not in message]
        if unnamed:
            return f"message {message!r} does not name the field(s) {unnamed}"
    return None


# Strings hypothesis rarely draws on its own, each of which once got a 5xx: a NUL (Postgres cannot
# store it), a lone surrogate (sent as the JSON escape "\\ud800"; nothing can encode it as UTF-8) and
# a string long enough to matter to Temporal's and Kubernetes' limits.
POISONS = ("\x00", "\ud800", "\udfff", "x" * 300_000)


def poisoned(value: Any, poison: str) -> tuple[Any, bool]:
    """`value` with `poison` spliced into every string in it (keys included); whether there was one."""
    if isinstance(value, str):
        return value[:1] + poison + value[1:], True
    if isinstance(value, list):
        items = [poisoned(v, poison) for v in value]
        return [v for v, _ in items], any(hit for _, hit in items)
    if isinstance(value, dict):
        out, hit = {}, False
        for key, item in value.items():
            new_key, key_hit = poisoned(key, poison) if isinstance(key, str) else (key, False)
            out[new_key], item_hit = poisoned(item, poison)
            hit = hit or key_hit or item_hit
        return out, hit
    return value, False


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_no_server_error_and_one_error_shape(case, served_api):
    check_answer(case, case.call(base_url=served_api, headers=as_("tok-ada"), timeout=30))
    # The same request with poisoned strings, the poison chosen by the case so every kind comes up.
    body = case.body if isinstance(case.body, (dict, list)) else None
    poison = POISONS[zlib.crc32(repr((case.path, body, case.query)).encode()) % len(POISONS)]
    new_body, body_hit = poisoned(body, poison)
    # A query travels as UTF-8 in the URL, which cannot carry a surrogate and need not carry 300 KB.
    new_query, query_hit = poisoned(dict(case.query or {}), "\x00")
    if body_hit or query_hit:
        # Sent by hand: the case would re-check its own metadata, which cannot encode a surrogate.
        # json.dumps escapes it ("\\ud800"), as a hostile client would send it.
        content = json.dumps(new_body if body_hit else body).encode() if body is not None else None
        response = httpx.request(case.method, served_api + case.formatted_path,
                                 params=new_query if query_hit else case.query, content=content, timeout=30,
                                 headers={**as_("tok-ada"), "content-type": "application/json"})
        check_answer(case, response, poison=poison[:20])
    send_oversized(case, served_api)


# Oversized input of the two other kinds: every list in a body grown far past any bound the API sets
# (still under the body cap, so the list bound must answer, not the cap), and a body larger than the
# cap (sent once per operation: it is megabytes). Both must be a 4xx in the one error shape.
LONG_LIST = 5_000
OVERSIZED_BODY = 9 * 1024 * 1024  # past the API's cap and past /codec's larger one
_oversized_sent: set[tuple[str, str]] = set()
# Long lists go out with the first few cases of each operation: a refusal costs the server a
# validation of thousands of items, and more cases of one operation add little.
INFLATED_PER_OPERATION = 3
_inflated_sent: dict[tuple[str, str], int] = {}


def inflated(value: Any) -> tuple[Any, bool]:
    """`value` with each outermost list in it grown to LONG_LIST items (copies of its first, or short
    strings). Lists inside lists stay as they are: growing both would square the size."""
    if isinstance(value, list):
        filler = value[0] if value else "x"
        return value + [filler] * (LONG_LIST - len(value)), True
    if isinstance(value, dict):
        out, hit = {}, False
        for key, item in value.items():
            out[key], item_hit = inflated(item)
            hit = hit or item_hit
        return out, hit
    return value, False


def send_oversized(case, served_api: str) -> None:
    body = case.body if isinstance(case.body, (dict, list)) else None
    if body is None:
        return
    headers = {**as_("tok-ada"), "content-type": "application/json"}
    operation = (case.method, case.path)
    big, hit = inflated(body)
    if hit and _inflated_sent.get(operation, 0) < INFLATED_PER_OPERATION:
        _inflated_sent[operation] = _inflated_sent.get(operation, 0) + 1
        response = httpx.request(case.method, served_api + case.formatted_path, params=case.query,
                                 content=json.dumps(big).encode(), headers=headers, timeout=30)
        check_answer(case, response, poison=f"lists of {LONG_LIST}")
    if operation not in _oversized_sent:
        _oversized_sent.add(operation)
        # Valid JSON (trailing whitespace), just too much of it.
        content = json.dumps(body).encode() + b" " * OVERSIZED_BODY
        response = httpx.request(case.method, served_api + case.formatted_path, params=case.query,
                                 content=content, headers=headers, timeout=60)
        check_answer(case, response, poison=f"a body of {len(content)} bytes")
        assert response.status_code == 413, f"{case.method} {case.formatted_path}: {response.status_code}"


def check_answer(case, response, poison: str = "") -> None:
    where = f"{case.method} {case.formatted_path}" + (f" poisoned with {poison!r}" if poison else "") \
        + f" → {response.status_code}"
    assert response.status_code < 500, f"{where}: {response.text[:500]}"
    if response.status_code >= 400:
        content_type = response.headers.get("content-type") or ""
        if isinstance(content_type, list):  # schemathesis: name → [values]
            content_type = content_type[0]
        body = response.json() if content_type.startswith("application/json") else response.text[:300]
        problem = error_shape_problem(response.status_code, content_type, body)
        assert problem is None, f"{where}: {problem}"


@pytest.mark.parametrize("status, body, wrong", [
    (404, {"error": {"code": "not_found", "message": "cluster 'x' is not registered"}}, None),
    (422, {"error": {"code": "invalid", "message": "body.name: Field required",
                     "details": [{"field": "body.name", "problem": "Field required"}]}}, None),
    (404, {"detail": "Not Found"}, "body is not"),
    (404, {"error": {"code": "not_found", "message": "Not Found"}}, "does not say what was wrong"),
    (422, {"error": {"code": "invalid", "message": "invalid request",
                     "details": [{"field": "query.limit", "problem": "too big"}]}}, "does not say"),
    (422, {"error": {"code": "invalid", "message": "query.x: bad",
                     "details": [{"field": "query.limit", "problem": "too big"}]}}, "query.limit"),
    (400, {"error": {"code": "Bad Request", "message": "body is not JSON"}}, "snake_case"),
    (400, {"error": {"code": "bad_request", "message": "m", "trace": "..."}}, "error keys"),
])
def test_the_shape_check_itself(status, body, wrong):
    """The check above must be able to fail: it refuses each kind of bad answer."""
    problem = error_shape_problem(status, "application/json", body)
    assert (problem is None) if wrong is None else (wrong in problem)


# What the fuzzer found, pinned down so it stays fixed whatever the fuzzer happens to draw next time.

@pytest.mark.parametrize("method, path, params, body, code", [
    ("GET", "/v1/artifacts", {"model": "acme/\x00"}, None, "invalid_text"),
    ("GET", "/v1/artifacts", {"state": "draft\x00"}, None, "invalid_text"),
    ("POST", "/v1/endpoints", None, {"name": "kimi", "workloads": ["wl-\x00"]}, "invalid"),
])
async def test_nul_in_text_is_a_422_not_a_500(api, method, path, params, body, code):
    r = await api.request(method, path, params=params, json=body, headers=as_("tok-ada"))
    assert r.status_code == 422, r.text
    assert error_shape_problem(422, r.headers["content-type"], r.json()) is None
    assert r.json()["error"]["code"] == code and "NUL" in r.json()["error"]["message"]


async def test_router_refusals_name_the_request(api):
    wrong_method = await api.request("TRACE", "/v1/clusters", headers=as_("tok-ada"))
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"] == {
        "code": "method_not_allowed", "message": "method not allowed: TRACE /v1/clusters (allowed: GET, POST)"}
    nowhere = await api.get("/v1/nowhere", headers=as_("tok-ada"))
    assert nowhere.status_code == 404
    assert nowhere.json()["error"] == {"code": "not_found", "message": "no such route: GET /v1/nowhere"}


@pytest.mark.parametrize("path, body, field", [
    ("/v1/artifacts/acme/model@abc/review", {"decision": "approve", "draft_version": 1, "comment": "ok\x00"},
     "comment"),
    ("/v1/workloads", {"artifact_id": "acme/model@abc", "hardware": "h200", "variant": "m\x00"}, "variant"),
])
async def test_nul_in_text_bound_for_a_workflow_is_refused_before_it_starts(api, path, body, field):
    # Past the API these would reach an activity's insert and fail it on every retry.
    r = await api.post(path, json=body, headers=as_("tok-ada"))
    assert r.status_code == 422, r.text
    assert field in r.json()["error"]["message"] and "NUL" in r.json()["error"]["message"]


def test_a_signalled_decision_keeps_its_words_without_the_nul():
    from wingsmith.domain.review import ReviewSignal
    signal = ReviewSignal(reviewer="ana\x00", comment="fine\x00by me")
    assert signal.reviewer == "ana\ufffd" and signal.comment == "fine\ufffdby me"

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from wingsmith.adapters.kube import KubeError, classify, with_retries


def api_error(status: int, message: str = "boom") -> ApiException:
    exc = ApiException(status=status, reason="Reason")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


@pytest.mark.parametrize(("status", "kind", "retryable"), [
    (422, "SchemaRejected", False), (403, "Forbidden", False), (401, "Unauthorized", False),
    (400, "BadRequest", False), (404, "NotFound", False), (409, "Conflict", True),
    (429, "Throttled", True), (500, "ServerError", True), (503, "ServerError", True), (504, "ServerError", True),
])
def test_statuses_map_to_a_type_and_a_retry_verdict(status, kind, retryable):
    err = classify(api_error(status, "spec.components[1].multinode.nodeCount: must be >= 2"))
    assert (err.type, err.retryable, err.status) == (kind, retryable, status)
    assert "nodeCount" in err.message


def test_network_failures_are_retryable():
    err = classify(urllib3.exceptions.MaxRetryError(None, "/x", "connection refused"))
    assert err.type == "Unreachable" and err.retryable


def test_unknown_exceptions_are_not_swallowed():
    with pytest.raises(KeyError):
        classify(KeyError("x"))


def test_with_retries_retries_retryable_only():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise api_error(500)
        return "ok"

    assert with_retries(flaky, doing="x", sleep=lambda s: None) == "ok" and len(calls) == 3

    def schema():
        calls.append(1)
        raise api_error(422, "bad")

    calls.clear()
    with pytest.raises(KubeError) as info:
        with_retries(schema, doing="applying x", sleep=lambda s: None)
    assert len(calls) == 1 and info.value.type == "SchemaRejected" and "applying x: bad" in str(info.value)


def test_with_retries_gives_up_after_its_attempts():
    calls = []

    def down():
        calls.append(1)
        raise api_error(503)

    with pytest.raises(KubeError) as info:
        with_retries(down, doing="x", attempts=4, sleep=lambda s: None)
    assert len(calls) == 4 and info.value.retryable

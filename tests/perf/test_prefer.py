"""How long `POST /v1/workloads` waits for a traffic plan (RFC 7240's Prefer): the CLI and the console ask
for an answer at once; a client that says nothing waits for the plan, as `/v1` always answered it."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from api.routes.workloads import asked_wait
from api.services.target_plans import ANSWER_WITHIN_SECONDS
from contracts.traffic_plan import PLAN_TIMEOUT


def _asking(prefer: str | None) -> Request:
    headers = [(b"prefer", prefer.encode())] if prefer is not None else []
    return Request({"type": "http", "method": "POST", "path": "/v1/workloads", "headers": headers})


@pytest.mark.parametrize(("prefer", "waits"), [
    (None, PLAN_TIMEOUT.total_seconds()),  # an old client: the plan itself, as before
    ("respond-async", ANSWER_WITHIN_SECONDS),
    ("Respond-Async, wait=10", 10.0),
    ("wait=0", 0.0),
    ('wait="45"', 45.0),
    ("wait=soon", PLAN_TIMEOUT.total_seconds()),  # not understood: ignored
    ("handling=strict", PLAN_TIMEOUT.total_seconds()),
])
def test_the_wait_a_caller_asks_for(prefer: str | None, waits: float):
    assert asked_wait(_asking(prefer)) == waits

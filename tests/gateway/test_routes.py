"""The shared route model: what is accepted, and what each bad input is told."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from wingsmith.domain.gateway import Backend, EndpointRoutes, RouteStatus
from wingsmith.domain.gateway.routes import BackendStatus

GOOD = {"id": "sim-east/kimi-k3-7f3a", "cluster": "sim-east", "workload_id": "wl-1",
        "url": "http://127.0.0.1:8123/frontends/sim-east/default/kimi-k3", "weight": 2}


@pytest.mark.parametrize(("change", "complaint"), [
    ({"url": "ftp://host/x"}, "must be http:// or https://"),
    ({"url": "http:///nohost"}, "with a host"),
    ({"url": "http://host:99999"}, "invalid port"),
    ({"url": "http://host/v1"}, "without /v1"),
    ({"url": "http://host/?a=1"}, "query or fragment"),
    ({"url": "http://user:pw@host"}, "must not carry credentials"),
    ({"weight": -1}, "greater than or equal to 0"),
    ({"weight": 10_001}, "less than or equal to 10000"),
    ({"id": "Upper/Case"}, "lower-case letters"),
    ({"id": "-x"}, "start and end with a letter or digit"),
    ({"cluster": ""}, "at least 1 character"),
    ({"extra": 1}, "Extra inputs are not permitted"),
    ({"served_model": "bad name"}, "not a valid model name"),
])
def test_bad_backends_are_named(change, complaint):
    with pytest.raises(ValidationError) as caught:
        Backend.model_validate({**GOOD, **change})
    assert complaint in str(caught.value)


def test_credentials_in_a_url_are_not_echoed():
    with pytest.raises(ValidationError) as caught:
        Backend.model_validate({**GOOD, "url": "http://user:hunter2@host"})
    assert "hunter2" not in str(caught.value).split("input_value")[0]


def test_good_backend_is_normalised():
    backend = Backend.model_validate({**GOOD, "url": GOOD["url"] + "/"})
    assert backend.url == GOOD["url"]
    assert not backend.draining
    assert Backend.model_validate({**GOOD, "weight": 0}).draining
    assert backend.model_for("kimi-k3") == "kimi-k3"
    backend = Backend.model_validate({**GOOD, "served_model": "moonshotai/Kimi-K3"})
    assert backend.model_for("kimi-k3") == "moonshotai/Kimi-K3"


@pytest.mark.parametrize("name", ["kimi-k3", "moonshotai/Kimi-K3", "deepseek-ai/DeepSeek-V3.1", "org/m:v2@rev", "a"])
def test_model_names_clients_send_are_accepted(name):
    assert EndpointRoutes(model_name=name).model_name == name


@pytest.mark.parametrize("name", ["", " kimi", "kimi k3", "-kimi", "x" * 201, "kimi\n"])
def test_bad_model_names_are_refused(name):
    with pytest.raises(ValidationError, match="model name"):
        EndpointRoutes(model_name=name)


def test_backend_ids_are_unique_per_endpoint():
    with pytest.raises(ValidationError, match="appears twice"):
        EndpointRoutes(model_name="kimi-k3", backends=[GOOD, {**GOOD, "cluster": "sim-west"}])


def test_serving_and_in_flight():
    routes = EndpointRoutes(model_name="kimi-k3", backends=[GOOD, {**GOOD, "id": "sim-west/x", "weight": 0}])
    assert [b.id for b in routes.serving] == [GOOD["id"]]
    assert routes.backend("sim-west/x").draining
    assert routes.backend("nope") is None
    known = RouteStatus(routes=routes, backends=[BackendStatus(id="a", weight=1, healthy=True, in_flight=2),
                                                 BackendStatus(id="b", weight=0, healthy=True, in_flight=1)])
    assert known.in_flight == 3
    unknown = RouteStatus(routes=routes, backends=[BackendStatus(id="a", weight=1, healthy=None)])
    assert unknown.in_flight is None


def test_routes_round_trip_through_json():
    routes = EndpointRoutes(model_name="kimi-k3", backends=[{**GOOD, "draining_until": "2026-01-01T00:00:00Z"}])
    assert EndpointRoutes.model_validate_json(routes.model_dump_json()) == routes

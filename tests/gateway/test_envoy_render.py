"""Envoy AI Gateway rendering, pure: object kinds and names, weights, endpoints, labels, and
validation against the CRD schemas the emulator serves."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sim.kube.schema import ObjectSchema
from wingsmith.adapters.gateway.envoy import (
    BACKEND_ANNOTATION,
    ENDPOINT_LABEL,
    backend_name,
    endpoint_key,
    render_envoy_resources,
    route_name,
    routes_from_objects,
)
from wingsmith.domain.gateway import Backend, EndpointRoutes

CRDS = Path(__file__).resolve().parents[2] / "sim/kube/crds/envoy-ai-gateway.yaml"
SCHEMAS = {doc["spec"]["names"]["kind"]: ObjectSchema(doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
           for doc in yaml.safe_load_all(CRDS.read_text())}

ROUTES = EndpointRoutes(model_name="kimi-k3", backends=[
    Backend(id="sim-east/kimi-k3-a1", cluster="sim-east", workload_id="wl-1", weight=3,
            url="http://kimi-k3-frontend.serving.svc.cluster.local:8000"),
    Backend(id="sim-west/kimi-k3-b2", cluster="sim-west", workload_id="wl-1", weight=0,
            url="http://10.20.0.7:8000", draining_until="2026-05-01T12:00:00Z"),
    Backend(id="sim-nvl/kimi-k3-c3", cluster="sim-nvl", workload_id="wl-2", weight=1,
            url="https://nvl.example.com/frontends/sim-nvl/default/kimi-k3", served_model="moonshotai/Kimi-K3"),
])


def render(routes: EndpointRoutes = ROUTES, **kw):
    return render_envoy_resources(routes, namespace="envoy-ai-gateway", gateway_name="wingsmith", **kw)


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def test_kinds_and_apply_order():
    objects = render()
    assert [o["kind"] for o in objects] == ["Backend"] * 3 + ["AIServiceBackend"] * 3 + ["AIGatewayRoute"]
    assert {o["apiVersion"] for o in objects} == {"gateway.envoyproxy.io/v1alpha1", "aigateway.envoyproxy.io/v1alpha1"}
    assert by_kind(objects, "Backend")[0]["apiVersion"] == "gateway.envoyproxy.io/v1alpha1"


def test_route_matches_the_model_header_with_weighted_refs():
    route = by_kind(render(), "AIGatewayRoute")[0]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"headers": [{"type": "Exact", "name": "x-ai-eg-model", "value": "kimi-k3"}]}]
    assert [(r["name"], r["weight"]) for r in rule["backendRefs"]] == [
        (backend_name("kimi-k3", b.id), b.weight) for b in ROUTES.backends]
    assert rule["backendRefs"][2]["modelNameOverride"] == "moonshotai/Kimi-K3"
    assert "modelNameOverride" not in rule["backendRefs"][0]
    assert route["spec"]["parentRefs"] == [
        {"name": "wingsmith", "kind": "Gateway", "group": "gateway.networking.k8s.io"}]
    assert rule["timeouts"] == {"request": "600s"}


def test_backends_hold_host_and_port():
    endpoints = [b["spec"]["endpoints"] for b in by_kind(render(), "Backend")]
    assert endpoints == [
        [{"fqdn": {"hostname": "kimi-k3-frontend.serving.svc.cluster.local", "port": 8000}}],
        [{"ip": {"address": "10.20.0.7", "port": 8000}}],
        [{"fqdn": {"hostname": "nvl.example.com", "port": 443}}],
    ]


def test_service_backends_point_at_their_backend_with_the_openai_schema():
    services = by_kind(render(), "AIServiceBackend")
    for service in services:
        assert service["spec"]["backendRef"] == {"name": service["metadata"]["name"], "kind": "Backend",
                                                 "group": "gateway.envoyproxy.io"}
    assert [s["spec"]["schema"] for s in services] == [
        {"name": "OpenAI"}, {"name": "OpenAI"},
        {"name": "OpenAI", "prefix": "/frontends/sim-nvl/default/kimi-k3/v1"}]


def test_names_are_deterministic_valid_and_distinct():
    assert render() == render()
    names = [o["metadata"]["name"] for o in render()]
    assert all(len(n) <= 63 and n == n.lower() and n[0].isalnum() and n[-1].isalnum() for n in names)
    assert route_name("kimi-k3").startswith("wingsmith-kimi-k3-")
    # Names that slug the same still get different objects.
    assert endpoint_key("Kimi-K3") != endpoint_key("kimi-k3")
    assert endpoint_key("moonshotai/Kimi-K3").startswith("moonshotai-kimi-k3-")
    long_id = "sim-east/" + "x" * 100
    assert len(backend_name("m" * 200, long_id)) <= 63
    assert backend_name("m" * 200, long_id) != backend_name("m" * 200, long_id + "y")


def test_every_object_is_labelled_for_reconciliation():
    for obj in render():
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "wingsmith"
        assert labels[ENDPOINT_LABEL] == endpoint_key("kimi-k3")
        assert obj["metadata"]["namespace"] == "envoy-ai-gateway"


@pytest.mark.parametrize("routes", [ROUTES, EndpointRoutes(model_name="empty")], ids=["three", "none"])
def test_rendered_objects_pass_the_crd_schemas(routes):
    for obj in render(routes, gateway_namespace="gateways"):
        schema = SCHEMAS[obj["kind"]]
        assert schema.causes(obj) == [], obj["metadata"]["name"]
        assert schema.unknown_fields(obj) == [], obj["metadata"]["name"]


def test_the_schemas_catch_mistakes():
    route = by_kind(render(), "AIGatewayRoute")[0]
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = -1
    route["spec"]["rules"][0]["backendRef"] = []
    assert SCHEMAS["AIGatewayRoute"].causes(route)
    assert SCHEMAS["AIGatewayRoute"].unknown_fields(route) == ["spec.rules[0].backendRef"]


def test_objects_read_back_as_the_same_routes():
    objects = render()
    again = routes_from_objects(by_kind(objects, "AIGatewayRoute")[0], by_kind(objects, "AIServiceBackend"))
    assert again == ROUTES
    assert "weight" not in by_kind(objects, "AIServiceBackend")[0]["metadata"]["annotations"][BACKEND_ANNOTATION]


def test_gateway_in_another_namespace_is_referenced_there():
    route = by_kind(render(gateway_namespace="gateways"), "AIGatewayRoute")[0]
    assert route["spec"]["parentRefs"][0]["namespace"] == "gateways"

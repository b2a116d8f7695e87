"""What the plane renders for `WINGSMITH_GATEWAY=envoy` (wingsmith/adapters/gateway/envoy.py) against the CRD
schemas Envoy AI Gateway, Envoy Gateway and Gateway API publish (sim/envoy_crds, SOURCE.md names the
commits): every object is of a served version, valid against its `openAPIV3Schema`, and holds no field
the schema does not declare (a real API server would prune it without a word). The CEL rules
(`x-kubernetes-validations`) are not evaluated here; the emulator's apply tests cover what they say
about references (tests/gateway/test_envoy_apply.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from wingsmith.adapters.gateway.envoy import render_envoy_resources
from wingsmith.domain.gateway import Backend, EndpointRoutes

CRDS = Path(__file__).resolve().parents[2] / "sim" / "envoy_crds"


def crds() -> dict[tuple[str, str], dict[str, Any]]:
    """(group, kind) → CRD."""
    out = {}
    for path in CRDS.glob("*.json"):
        crd = json.loads(path.read_text())
        out[(crd["spec"]["group"], crd["spec"]["names"]["kind"])] = crd
    return out


def version_schema(obj: dict[str, Any]) -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    crd = crds().get((group, obj["kind"]))
    assert crd is not None, f"no published CRD for {group} {obj['kind']}"
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    assert version in served, f"{obj['kind']} {version} is not served (served: {sorted(served)})"
    return served[version]["schema"]["openAPIV3Schema"]


def undeclared(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The fields of `value` its structural schema does not declare (what an API server prunes)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        found = []
        for key, sub in value.items():
            if props is not None and key in props:
                found += undeclared(sub, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += undeclared(sub, extra, f"{path}.{key}")
            elif props is not None or extra is None:
                found.append(f"{path}.{key}")
        return found
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [p for i, item in enumerate(value) for p in undeclared(item, schema["items"], f"{path}[{i}]")]
    return []


def check(obj: dict[str, Any]) -> None:
    schema = version_schema(obj)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=str)
    assert not errors, "\n".join(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)
    # metadata is the API server's own (ObjectMeta), declared as a bare object in every CRD.
    assert undeclared({k: v for k, v in obj.items() if k != "metadata"}, schema) == [], obj["kind"]


ROUTES = {
    "ip-and-fqdn": EndpointRoutes(model_name="kimi-k3", backends=[
        Backend(id="east/kimi", cluster="east", workload_id="w1", url="http://10.0.0.7:8000", weight=3),
        Backend(id="west/kimi", cluster="west", workload_id="w2", url="http://kimi.west.svc.cluster.local",
                weight=1)]),
    "under-a-path-and-renamed": EndpointRoutes(model_name="Org/Model-Name_v2", backends=[
        Backend(id="c/w", cluster="c", workload_id="w", url="https://ingress.example.com/frontends/c/ns/w",
                weight=1, served_model="org/model-name-v2")]),
    "draining": EndpointRoutes(model_name="m", backends=[
        Backend(id="a/m", cluster="a", workload_id="w", url="http://10.1.1.1:80", weight=0)]),
}


@pytest.mark.parametrize("gateway_namespace", [None, "envoy-gateway-system"])
@pytest.mark.parametrize("routes", ROUTES.values(), ids=ROUTES.keys())
def test_every_rendered_object_is_valid_against_the_published_crds(routes, gateway_namespace):
    rendered = render_envoy_resources(routes, namespace="wingsmith", gateway_name="ai-gateway",
                                      gateway_namespace=gateway_namespace)
    assert {o["kind"] for o in rendered} == {"Backend", "AIServiceBackend", "AIGatewayRoute"}
    for obj in rendered:
        check(obj)


def test_the_routes_parent_is_a_gateway_api_parent_reference():
    """The AIGatewayRoute's parentRefs are Gateway API ParentReferences: valid against HTTPRoute's."""
    httproute = crds()[("gateway.networking.k8s.io", "HTTPRoute")]
    served = next(v for v in httproute["spec"]["versions"] if v["name"] == "v1")
    parent_schema = served["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["parentRefs"]["items"]
    route = render_envoy_resources(ROUTES["ip-and-fqdn"], namespace="wingsmith", gateway_name="ai-gateway",
                                   gateway_namespace="elsewhere")[-1]
    for parent in route["spec"]["parentRefs"]:
        jsonschema.Draft7Validator(parent_schema).validate(parent)
        assert undeclared(parent, parent_schema) == []
    assert ("gateway.networking.k8s.io", "Gateway") in crds()


def test_the_check_finds_what_a_server_would_refuse_or_prune():
    """The checks above can fail: a field the schema lacks, and a value it refuses."""
    route = render_envoy_resources(ROUTES["ip-and-fqdn"], namespace="wingsmith", gateway_name="ai-gateway")[-1]
    pruned = json.loads(json.dumps(route))
    pruned["spec"]["rules"][0]["retries"] = 3
    with pytest.raises(AssertionError):
        check(pruned)
    refused = json.loads(json.dumps(route))
    refused["spec"]["rules"][0]["backendRefs"][0]["weight"] = -1
    with pytest.raises(AssertionError):
        check(refused)


def test_the_ai_gateway_kinds_move_to_v1beta1_unchanged():
    """Upstream marks v1alpha1 deprecated (still served; v1beta1 is the storage version): the objects the
    plane renders are valid as v1beta1 too, so moving is a change of apiVersion alone."""
    for obj in render_envoy_resources(ROUTES["under-a-path-and-renamed"], namespace="wingsmith",
                                      gateway_name="ai-gateway"):
        if obj["apiVersion"].startswith("aigateway.envoyproxy.io/"):
            crd = crds()[("aigateway.envoyproxy.io", obj["kind"])]
            assert {v["name"]: bool(v.get("deprecated")) for v in crd["spec"]["versions"]} == {
                "v1alpha1": True, "v1beta1": False}
            check({**obj, "apiVersion": "aigateway.envoyproxy.io/v1beta1"})

"""EnvoyGatewayClient through the kubernetes client against the emulator, which validates the
Envoy kinds against the CRDs of sim/kube/crds."""

from __future__ import annotations

import pytest

from wingsmith.adapters.gateway import EnvoyGatewayClient, GatewayClient, GatewayError
from wingsmith.adapters.gateway.envoy import ENDPOINT_LABEL, endpoint_key, route_name
from wingsmith.adapters.kube.client import KubeconfigRef
from wingsmith.domain.gateway import Backend, EndpointRoutes

NAMESPACE = "envoy-ai-gateway"
KINDS = {"AIGatewayRoute": ("aigateway.envoyproxy.io", "aigatewayroutes"),
         "AIServiceBackend": ("aigateway.envoyproxy.io", "aiservicebackends"),
         "Backend": ("gateway.envoyproxy.io", "backends")}


def backend(cluster: str, weight: int) -> Backend:
    return Backend(id=f"{cluster}/kimi-k3", cluster=cluster, workload_id="wl-1", weight=weight,
                   url=f"http://127.0.0.1:8999/frontends/{cluster}/default/kimi-k3")


def objects(sim, kind: str, model: str = "kimi-k3") -> dict[str, dict]:
    store = sim.cluster("sim-gateway").store
    group, plural = KINDS[kind]
    rt = store.type_of(group, plural)
    items = store.list(rt, rt.storage_version, NAMESPACE, f"{ENDPOINT_LABEL}={endpoint_key(model)}")["items"]
    return {o["metadata"]["name"]: o for o in items}


@pytest.fixture
def envoy(sim):
    client = EnvoyGatewayClient(KubeconfigRef(source=str(sim.kubeconfig_path), context="sim-gateway"),
                                namespace=NAMESPACE, gateway_name="wingsmith")
    yield client
    for name in ("kimi-k3", "other"):
        client.delete_routes(name)
    client.close()


def test_set_routes_applies_validated_objects(sim, envoy):
    assert isinstance(envoy, GatewayClient)
    routes = EndpointRoutes(model_name="kimi-k3", backends=[backend("sim-east", 1), backend("sim-west", 1)])
    envoy.set_routes(routes)
    route = objects(sim, "AIGatewayRoute")[route_name("kimi-k3")]
    assert [r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]] == [1, 1]
    assert len(objects(sim, "AIServiceBackend")) == len(objects(sim, "Backend")) == 2
    managers = {f["manager"] for f in route["metadata"]["managedFields"]}
    assert managers == {"wingsmith"}
    assert envoy.get_route("kimi-k3") == routes
    assert envoy.get_routes() == [routes]
    status = envoy.status("kimi-k3")
    assert [b.in_flight for b in status.backends] == [None, None] and status.in_flight is None


def test_reapplying_the_same_routes_changes_nothing(sim, envoy):
    routes = EndpointRoutes(model_name="kimi-k3", backends=[backend("sim-east", 2)])
    envoy.set_routes(routes)
    before = {k: {n: o["metadata"]["resourceVersion"] for n, o in objects(sim, k).items()} for k in KINDS}
    envoy.set_routes(routes)
    after = {k: {n: o["metadata"]["resourceVersion"] for n, o in objects(sim, k).items()} for k in KINDS}
    assert before == after


def test_new_weights_drain_and_removed_backends_are_pruned(sim, envoy):
    envoy.set_routes(EndpointRoutes(model_name="kimi-k3", backends=[backend("sim-east", 1), backend("sim-west", 1)]))
    envoy.set_routes(EndpointRoutes(model_name="other", backends=[backend("sim-east", 1)]))
    drained = EndpointRoutes(model_name="kimi-k3", backends=[backend("sim-east", 1), backend("sim-west", 0)])
    envoy.set_routes(drained)
    assert envoy.get_route("kimi-k3") == drained
    gone = EndpointRoutes(model_name="kimi-k3", backends=[backend("sim-east", 1)])
    envoy.set_routes(gone)
    assert envoy.get_route("kimi-k3") == gone
    assert len(objects(sim, "AIServiceBackend")) == len(objects(sim, "Backend")) == 1
    # Another endpoint's objects are left alone.
    assert len(objects(sim, "Backend", "other")) == 1
    assert [r.model_name for r in envoy.get_routes()] == ["kimi-k3", "other"]


def test_delete_routes_is_idempotent(sim, envoy):
    envoy.set_routes(EndpointRoutes(model_name="kimi-k3", backends=[backend("sim-east", 1)]))
    assert envoy.delete_routes("kimi-k3") is True
    assert all(objects(sim, kind) == {} for kind in KINDS)
    assert envoy.delete_routes("kimi-k3") is False
    assert envoy.get_route("kimi-k3") is None
    assert envoy.status("kimi-k3") is None


def test_api_errors_become_gateway_errors(sim, envoy):
    sim.faults("sim-gateway").update({"api_error_rate": 1.0})
    try:
        with pytest.raises(GatewayError) as caught:
            EnvoyGatewayClient(KubeconfigRef(source=str(sim.kubeconfig_path), context="sim-gateway"),
                               namespace=NAMESPACE, gateway_name="wingsmith", attempts=2).get_routes()
        assert caught.value.retryable and caught.value.type == "ServerError"
    finally:
        sim.faults("sim-gateway").reset()
    with pytest.raises(GatewayError) as missing:
        EnvoyGatewayClient(KubeconfigRef(source=str(sim.kubeconfig_path.parent / "absent")), namespace=NAMESPACE,
                           gateway_name="g")
    assert missing.value.type == "KubeconfigMissing" and not missing.value.retryable


def test_the_emulator_rejects_what_the_crds_do_not_allow(envoy):
    route = envoy.render(EndpointRoutes(model_name="kimi-k3", backends=[backend("sim-east", 1)]))[-1]
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = -3
    with pytest.raises(GatewayError) as caught:
        envoy._apply(route)
    assert caught.value.type == "SchemaRejected" and not caught.value.retryable
    assert "weight" in caught.value.message

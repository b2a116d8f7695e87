"""The upgrade's traffic analysis on real counters: the local gateway routes one endpoint to two
simulated DGD frontends (old and new version) by weight; the comparison over a window of the gateway's
own /metrics flags a new version with injected errors or latency, with its figures, and passes a
healthy one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import RunningGateway
from tests.sim_kube.kit import apply, dgd, get, ready_for, wait_for
from wingsmith.domain.gateway import Backend, EndpointRoutes
from wingsmith.domain.gateway.traffic import parse_counters
from wingsmith.domain.upgrade import UpgradeThresholds, judge

MODEL = "acme/Tiny-1B"
ENDPOINT = "tiny"


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[RunningGateway]:
    token = tmp_path / "token"
    token.write_text("upgrade-analysis-admin-token\n")
    gw = RunningGateway(tmp_path / "state", token)
    yield gw
    gw.stop()


def _window(gateway: RunningGateway, requests: int) -> dict:
    before = parse_counters(httpx.get(f"{gateway.url}/metrics").text, ENDPOINT)
    client_errors = 0
    with httpx.Client(timeout=10) as http:
        for i in range(requests):
            r = http.post(f"{gateway.url}/v1/chat/completions", json={
                "model": ENDPOINT, "messages": [{"role": "user", "content": f"hi {i}"}]})
            client_errors += r.status_code != 200
    after = parse_counters(httpx.get(f"{gateway.url}/metrics").text, ENDPOINT)
    return {b: c.since(before.get(b)) for b, c in after.items()} | {"client_errors": client_errors}


@pytest.mark.parametrize(("fault", "failing"), [
    ({"error_rate": 1.0}, "error rate"),
    ({"latency": 0.3}, "p99 latency"),
    (None, None),
])
def test_new_version_judged_against_old(sim, custom, namespace, gateway, fault, failing):
    for name in ("old", "new"):
        apply(custom, namespace, dgd(name, model=MODEL))
    for name in ("old", "new"):
        wait_for(lambda n=name: ready_for(get(custom, namespace, n), 1), what=f"{name} ready")
    cluster = sim.cluster("sim-east")
    if fault:
        sim.faults("sim-east").update({"frontends": {"new": fault}})
    gateway.client.set_routes(EndpointRoutes(model_name=ENDPOINT, backends=[
        Backend(id=f"sim-east/{name}", cluster="sim-east", workload_id="wl", url=cluster.frontend_url(namespace, name),
                weight=weight, served_model=MODEL) for name, weight in (("old", 1), ("new", 1))]))

    seen = _window(gateway, 40)
    verdict = judge(seen["sim-east/old"], seen["sim-east/new"], UpgradeThresholds(min_requests=5))
    # A failing version gets few attempts (each failure cools it down and the gateway retries on the
    # old one, so clients see no error); the failures it had are in the figures all the same.
    assert verdict.figures["new_requests"] >= (1 if fault == {"error_rate": 1.0} else 5), verdict
    assert seen["client_errors"] == 0
    if failing is None:
        assert verdict.healthy and verdict.enough_traffic and not verdict.failures, verdict
    else:
        assert not verdict.healthy and any(f.startswith(failing) for f in verdict.failures), verdict
    if fault == {"error_rate": 1.0}:
        assert verdict.figures["new_error_rate"] == 1.0 and verdict.figures["old_error_rate"] == 0.0

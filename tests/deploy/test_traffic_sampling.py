"""The production form of the traffic sampler (wingsmith/adapters/gateway/traffic_sampler.py): the gateway runs
two replicas or more, each with its own counters, so in every overlay the API reads each replica
through a headless Service's name (one address per ready pod), never through the load-balanced
Service, whose successive readings would come from different replicas and look like resets."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.deploy.render import OVERLAYS, by_kind, render
from wingsmith.domain.config import Settings


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda p: p.name)
def test_the_api_reads_every_gateway_replica(overlay):
    objects = render(overlay)
    namespace = next(o["metadata"].get("namespace") for o in by_kind(objects, "Deployment"))
    # The settings the API process starts with: the ConfigMaps its container takes its environment from.
    api = next(d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == "wingsmith-api")
    sources = {e["configMapRef"]["name"] for e in api["spec"]["template"]["spec"]["containers"][0].get("envFrom", [])
               if "configMapRef" in e}
    config = {k: v for cm in by_kind(objects, "ConfigMap") if cm["metadata"]["name"] in sources
              for k, v in (cm.get("data") or {}).items()}
    settings = Settings(traffic_gateway_dns=config.get("WINGSMITH_TRAFFIC_GATEWAY_DNS", ""),
                        traffic_gateway_urls=config.get("WINGSMITH_TRAFFIC_GATEWAY_URLS", ""))
    assert settings.traffic_gateway_dns and not settings.traffic_gateway_urls, \
        f"{overlay.name}: the API must resolve the gateway replicas, not read one address"
    gateway = next(d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == "wingsmith-gateway")
    pod_labels = gateway["spec"]["template"]["metadata"]["labels"]
    pod_ports = {p["name"]: p["containerPort"] for p in gateway["spec"]["template"]["spec"]["containers"][0]["ports"]}
    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    for url in settings.traffic_gateway_dns:
        parts = urlsplit(url)
        name, _, rest = (parts.hostname or "").partition(".")
        assert rest in ("", namespace, f"{namespace}.svc", f"{namespace}.svc.cluster.local"), url
        svc = services.get(name)
        assert svc is not None, f"{overlay.name}: {url} names no Service"
        # Headless (one address per pod), selecting the gateway's pods, on the port the pods serve, which
        # is the URL's port: the sampler reads the pod addresses directly.
        assert svc["spec"].get("clusterIP") == "None", f"{overlay.name}: Service/{name} is not headless"
        assert _selects(svc["spec"]["selector"], pod_labels)
        [port] = svc["spec"]["ports"]
        assert pod_ports[port["targetPort"]] == parts.port == port["port"]

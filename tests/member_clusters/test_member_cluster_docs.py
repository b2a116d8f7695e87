"""docs/member-clusters.md says what the code does: its Role is the plane's one list of permissions
(wingsmith/domain/member_clusters.py), its `temporal operator search-attribute create` commands are the plane's
search attributes with their types; every Deployment the overlays render has a readiness probe (the perf
worker's reads its Temporal connection, checked here on real /proc/net/tcp lines); the ingress component
renders and routes to the plane's Services."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.render import KUSTOMIZE, OVERLAYS, kubectl, render
from wingsmith.domain.config import SEARCH_ATTRIBUTES
from wingsmith.domain.member_clusters import PLANE_PERMISSIONS, permissions, rbac_manifests

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "member-clusters.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"\n{title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end > 0 else None]


def test_the_doc_s_role_is_the_plane_s_one_list_of_permissions():
    block = re.search(r"```yaml\n(.*?)```", _section("### The Role for the plane's user"), re.S)[1]
    assert list(yaml.safe_load_all(block)) == rbac_manifests("default", "hf-token", "wingsmith-plane")
    # and that list is every permission the preflight asks about, each verb once
    granted = {(r["apiGroups"][0], r["resources"][0], v) for doc in yaml.safe_load_all(block)
               if doc["kind"] in ("Role", "ClusterRole") for r in doc["rules"] for v in r["verbs"]}
    assert granted == {(p.group, p.resource, v) for p in permissions("hf-token") for v in p.verbs}
    assert len(granted) == sum(len(p.verbs) for p in PLANE_PERMISSIONS)


def test_the_doc_s_search_attribute_commands_are_the_plane_s_search_attributes():
    commands = re.findall(r"^temporal operator search-attribute create .*$", DOC, re.M)
    assert commands == [f'temporal operator search-attribute create --namespace "$TEMPORAL_NAMESPACE" '
                        f"--name {name} --type {kind}" for name, kind in SEARCH_ATTRIBUTES.items()]


def test_the_doc_is_linked_from_the_readme_and_production():
    readme = (ROOT / "README.md").read_text()
    where_next = readme[readme.index("## Where to go next"):]
    assert "[docs/member-clusters.md](docs/member-clusters.md)" in where_next
    assert "(member-clusters.md" in (ROOT / "docs" / "production.md").read_text()
    assert ('kubectl --kubeconfig "$WINGSMITH_HOME/kubeconfigs/simulated-clusters.yaml" --context sim-east '
            "get dynamographdeployments") in readme


def _deployments(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] == "Deployment"]


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda p: p.name)
def test_every_deployment_of_an_overlay_has_a_readiness_probe(overlay):
    kubectl()
    deployments = _deployments(render(overlay))
    assert "wingsmith-worker-perf" in {d["metadata"]["name"] for d in deployments}
    missing = [f"{d['metadata']['name']}/{c['name']}" for d in deployments
               for c in d["spec"]["template"]["spec"]["containers"] if not c.get("readinessProbe")]
    assert missing == []


ESTABLISHED = ("   3: 0A00020F:A1B2 0A6000C8:1C8D 01 00000000:00000000 02:000A3B1C 00000000 10001 0 4321 2 0 20 4 "
               "30 10 -1\n")
LISTENING = ("   0: 00000000:24E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000 10001 0 1234 1 0 100 0 0 "
             "10 0\n")
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
ESTABLISHED6 = ("   1: 0000000000000000FFFF00000A00020F:B00C 0000000000000000FFFF00000A6000C8:1C8D 01 "
                "00000000:00000000 02:00000A3B 00000000 10001 0 999 2 0 20 4 30 10 -1\n")


def test_the_perf_worker_is_ready_once_it_holds_a_connection(tmp_path):
    kubectl()
    perf = next(d for d in _deployments(render(OVERLAYS[0])) if d["metadata"]["name"] == "wingsmith-worker-perf")
    command = perf["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["exec"]["command"]
    assert command[:2] == ["sh", "-c"] and command[2].endswith(" /proc/net/tcp /proc/net/tcp6")

    def ready(tcp: str, tcp6: str) -> bool:
        (tmp_path / "tcp").write_text(tcp)
        (tmp_path / "tcp6").write_text(tcp6)
        script = command[2].replace("/proc/net/tcp /proc/net/tcp6", f"{tmp_path}/tcp {tmp_path}/tcp6")
        return subprocess.run(["sh", "-c", script], timeout=10).returncode == 0

    assert not ready(HEADER + LISTENING, HEADER)  # started, not yet connected to Temporal
    assert ready(HEADER + LISTENING + ESTABLISHED, HEADER)
    assert ready(HEADER, HEADER + ESTABLISHED6)  # Temporal reached over IPv6


def test_the_ingress_component_routes_to_the_plane_s_services(tmp_path):
    kubectl()
    # As the doc says to use it: listed among an overlay's components (the overlay's namespace applies).
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": "wingsmith",
        "resources": [os.path.relpath(KUSTOMIZE / "base", overlay)],
        "components": [os.path.relpath(KUSTOMIZE / "components" / "ingress-tls", overlay)]}))
    objects = render(overlay)
    services = {o["metadata"]["name"]: {p["name"] for p in o["spec"]["ports"]} for o in objects
                if o["kind"] == "Service"}
    ingresses = [o for o in objects if o["kind"] == "Ingress"]
    assert {i["metadata"]["name"] for i in ingresses} == {"wingsmith-api", "wingsmith-gateway"}
    for ingress in ingresses:
        assert ingress["metadata"]["namespace"] == "wingsmith"
        hosts = {h for t in ingress["spec"]["tls"] for h in t["hosts"]}
        for rule in ingress["spec"]["rules"]:
            assert rule["host"] in hosts  # every host served over TLS
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                assert backend["port"]["name"] in services[backend["name"]], backend

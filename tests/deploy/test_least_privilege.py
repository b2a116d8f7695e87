"""Each process of the production overlay reaches only what it needs: the workers' service account
may read only the Secrets it is given by name (never the API's token table, the database's URL or
the payload key), and egress NetworkPolicies keep the gateway and the perf worker away from the
database and Temporal, and the kube workers away from the database (docs/production.md, "Who reaches
what"). The policies are evaluated here as Kubernetes does: a pod selected by any egress policy may
open only the connections some rule of those policies allows."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.deploy.render import KUSTOMIZE, ROOT, KubectlMissing, by_kind, kubectl, render, secret_refs

PLANE_NS = "wingsmith"  # the production overlay's namespace


@pytest.fixture(scope="module", autouse=True)
def _kubectl() -> None:
    try:
        kubectl()
    except KubectlMissing as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def production() -> list[dict[str, Any]]:
    return render(KUSTOMIZE / "overlays" / "production")


# ---- Secrets ----------------------------------------------------------------------------------------

def _secret_rules(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{role['kind']}/{role['metadata']['name']}", rule)
            for role in by_kind(objects, "Role") + by_kind(objects, "ClusterRole")
            for rule in role.get("rules") or []
            if "" in rule.get("apiGroups", []) and {"secrets", "*"} & set(rule.get("resources", []))]


def test_the_workers_may_read_only_the_secrets_named_for_them(production):
    rules = _secret_rules(production)
    assert rules, "the production overlay grants no Secret at all: the kubeconfig reader is gone"
    process_secrets = {name for name, _key in secret_refs(production)}  # what the pods are given by reference
    for where, rule in rules:
        names = rule.get("resourceNames") or []
        assert names, f"{where} may read every Secret in the namespace (name them with resourceNames)"
        assert set(rule["verbs"]) == {"get"}, f"{where}: {rule['verbs']} (get by name is all a reference needs)"
        assert not set(names) & process_secrets, f"{where} may read Secrets other processes hold: {names}"
        assert "wingsmith-api-tokens" not in names


def test_the_docs_create_every_secret_a_role_names(production):
    doc = (ROOT / "docs" / "production.md").read_text()
    for _where, rule in _secret_rules(production):
        for name in rule.get("resourceNames") or []:
            assert re.search(rf"create secret \w+ {re.escape(name)}\b", doc), name


# ---- egress -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Peer:
    """Somewhere a pod may connect to: a pod (namespace and labels) or an address outside the cluster."""
    ip: str
    namespace: str | None = None  # None: outside the cluster
    labels: dict[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.ip, self.namespace))



API = Peer("10.244.1.10", PLANE_NS, {"app.kubernetes.io/name": "wingsmith", "app.kubernetes.io/component": "api"})
KUBE_DNS = Peer("10.96.0.10", "kube-system", {"k8s-app": "kube-dns"})
TEMPORAL_IN_CLUSTER = Peer("10.244.5.5", "temporal", {"app.kubernetes.io/name": "temporal"})
TEMPORAL_CLOUD = Peer("203.0.113.10")
POSTGRES_OUTSIDE = Peer("10.20.0.5")  # db.example.internal
POSTGRES_IN_CLUSTER = Peer("10.244.6.6", "databases", {"app": "postgres"})
HUB = Peer("203.0.113.20")
MEMBER_CLUSTER = Peer("198.51.100.7")  # its API server, and the model frontends it serves
FRONTEND_IN_CLUSTER = Peer("10.244.7.7", "dynamo", {"app": "frontend"})

POSTGRES = [(POSTGRES_OUTSIDE, 5432), (POSTGRES_IN_CLUSTER, 5432)]
# Temporal's frontend, and its history, matching and worker services and membership ports, which a
# pod that reached them could talk to without any of the frontend's checks.
TEMPORAL = [(p, port) for p in (TEMPORAL_IN_CLUSTER, TEMPORAL_CLOUD) for port in (7233, 7234, 7235, 7239, 6933)]
DNS = [(KUBE_DNS, 53, "UDP"), (KUBE_DNS, 53, "TCP")]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    def holds(e: dict[str, Any]) -> bool:
        op, value = e["operator"], labels.get(e["key"])
        if op in ("In", "NotIn"):
            return (value in e["values"]) == (op == "In")
        assert op in ("Exists", "DoesNotExist"), op
        return (value is not None) == (op == "Exists")
    return (all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())
            and all(holds(e) for e in selector.get("matchExpressions") or []))


def _namespace_labels(namespace: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": namespace}


def _peer_matches(rule_peer: dict[str, Any], to: Peer) -> bool:
    if "ipBlock" in rule_peer:
        # Strict: an ipBlock is taken to match pods' addresses too (whether it does is the CNI's choice).
        block = rule_peer["ipBlock"]
        ip = ipaddress.ip_address(to.ip)
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(e) for e in block.get("except") or [])
    if to.namespace is None:
        return False
    if "namespaceSelector" in rule_peer:
        if not _selects(rule_peer["namespaceSelector"], _namespace_labels(to.namespace)):
            return False
    elif to.namespace != PLANE_NS:
        return False
    return _selects(rule_peer.get("podSelector") or {}, to.labels)


def _port_matches(rule_port: dict[str, Any], port: int, protocol: str) -> bool:
    if rule_port.get("protocol", "TCP") != protocol:
        return False
    if "port" not in rule_port:
        return True
    start = rule_port["port"]
    assert isinstance(start, int), f"a named port ({start}) means nothing on another pod: use numbers"
    return start <= port <= rule_port.get("endPort", start)


def may_connect(objects: list[dict[str, Any]], deployment: str, to: Peer, port: int, protocol: str = "TCP") -> bool:
    [d] = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == deployment]
    labels = d["spec"]["template"]["metadata"]["labels"]
    policies = [p for p in by_kind(objects, "NetworkPolicy") if "Egress" in p["spec"].get("policyTypes", [])
                and _selects(p["spec"]["podSelector"], labels)]
    if not policies:
        return True  # egress is open
    return any((not rule.get("to") or any(_peer_matches(peer, to) for peer in rule["to"]))
               and (not rule.get("ports") or any(_port_matches(p, port, protocol) for p in rule["ports"]))
               for policy in policies for rule in policy["spec"].get("egress") or [])


def _unreachable(objects, deployment: str, targets) -> list:
    return [(t[0].ip, *t[1:]) for t in targets if not may_connect(objects, deployment, *t)]


def _reachable(objects, deployment: str, targets) -> list:
    return [(t[0].ip, *t[1:]) for t in targets if may_connect(objects, deployment, *t)]


def test_the_gateway_reaches_the_api_and_the_backends_never_the_database_or_temporal(production):
    gateway = "wingsmith-gateway"
    needs = [(API, 8000), (MEMBER_CLUSTER, 8000), (MEMBER_CLUSTER, 443), (FRONTEND_IN_CLUSTER, 8000), *DNS]
    assert _unreachable(production, gateway, needs) == []
    assert _reachable(production, gateway, POSTGRES + TEMPORAL) == []


def test_the_perf_worker_reaches_temporal_only(production):
    perf = "wingsmith-worker-perf"
    assert _unreachable(production, perf, [(TEMPORAL_IN_CLUSTER, 7233), (TEMPORAL_CLOUD, 7233), *DNS]) == []
    others = [*POSTGRES, (API, 8000), (HUB, 443), (MEMBER_CLUSTER, 6443), (MEMBER_CLUSTER, 443),
              (TEMPORAL_IN_CLUSTER, 7234), (TEMPORAL_IN_CLUSTER, 7235), (TEMPORAL_IN_CLUSTER, 6933)]
    assert _reachable(production, perf, others) == []


@pytest.mark.parametrize("worker", ["wingsmith-worker-kube", "wingsmith-worker-observe"])
def test_the_kube_workers_reach_temporal_and_clusters_never_the_database(production, worker):
    needs = [(TEMPORAL_IN_CLUSTER, 7233), (TEMPORAL_CLOUD, 7233), (MEMBER_CLUSTER, 6443), (MEMBER_CLUSTER, 443),
             (FRONTEND_IN_CLUSTER, 8000), *DNS]
    assert _unreachable(production, worker, needs) == []
    assert _reachable(production, worker, POSTGRES) == []


@pytest.mark.parametrize("deployment", ["wingsmith-api", "wingsmith-worker-orchestration"])
def test_the_api_and_the_orchestration_worker_reach_everything_they_use(production, deployment):
    needs = [*POSTGRES, (TEMPORAL_IN_CLUSTER, 7233), (TEMPORAL_CLOUD, 7233), (HUB, 443),
             (Peer("10.244.2.2", PLANE_NS, {"app.kubernetes.io/component": "gateway"}), 8080), *DNS]
    assert _unreachable(production, deployment, needs) == []


def test_the_checks_catch_an_open_gateway(production):
    """The evaluator is not vacuous: without the egress policies everything is reachable."""
    without = [o for o in production if not (o["kind"] == "NetworkPolicy" and "Egress" in o["spec"]["policyTypes"])]
    assert _reachable(without, "wingsmith-gateway", POSTGRES + TEMPORAL) != []
    assert _reachable(without, "wingsmith-worker-perf", POSTGRES) != []

"""One simulated-operator pass at a time, driven directly (no server, no ticks): a pass shares one read
of the store between every deployment, and a cluster where nothing changes costs no pass at all."""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest

from sim.kube import LABEL_COMPONENT, LABEL_DGD, ClusterSpec, NodePool
from sim.kube.clusters import SimulatedCluster
from sim.kube.frontend import Frontends
from sim.kube.resources import crd_dir, load_crds
from sim.kube.store import WriteOptions
from tests.sim_kube.kit import dgd


@functools.cache
def _crds() -> tuple:
    return tuple(load_crds(crd_dir(None)))


def _cluster(nodes: int = 1, delay: float = 0.0) -> SimulatedCluster:
    """One H100 cluster (8 GPUs a node), kept in memory; nothing runs until a test calls a pass."""
    spec = ClusterSpec(name="pass", region="lab", node_pools=[NodePool.of("h100", nodes)])
    return SimulatedCluster(spec, _crds(), "http://sim.invalid/clusters/pass", "http://sim.invalid/frontends/pass",
                            Frontends(), delay, True)


def _create(cluster: SimulatedCluster, name: str, gpus: int) -> None:
    rt = cluster.store.type_of("nvidia.com", "dynamographdeployments")
    cluster.store.create(rt, "v1beta1", "default", dgd(name, gpus=gpus, product="NVIDIA-H100"),
                         WriteOptions(manager="test"))


def _state(cluster: SimulatedCluster, name: str) -> str | None:
    return (cluster.dgd("default", name).get("status") or {}).get("state")


def _until(cluster: SimulatedCluster, check, passes: int = 200, pause: float = 0.0) -> None:
    for _ in range(passes):
        cluster.operator.reconcile_all()
        if check():
            return
        time.sleep(pause)
    raise AssertionError("the operator did not get there")


def _worker(cluster: SimulatedCluster, name: str) -> dict[str, Any]:
    (pod,) = cluster.pods("default", f"{LABEL_DGD}={name},{LABEL_COMPONENT}=VllmWorker")
    return pod


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch):
    """Counts the store reads the operator makes, per cluster passed in."""
    def spy(cluster: SimulatedCluster) -> list[str]:
        calls: list[str] = []
        for method in ("list", "stored"):
            real = getattr(cluster.store, method)

            def counted(rt, *args, _real=real, **kwargs):
                calls.append(rt.plural)
                return _real(rt, *args, **kwargs)
            monkeypatch.setattr(cluster.store, method, counted)
        return calls
    return spy


def test_a_pass_with_nothing_changed_reads_and_writes_nothing(reads):
    cluster = _cluster()
    for name in ("one", "two"):
        _create(cluster, name, gpus=2)
    _until(cluster, lambda: _state(cluster, "one") == _state(cluster, "two") == "successful")
    calls = reads(cluster)
    revision = cluster.store.resource_version

    for _ in range(5):
        cluster.operator.reconcile_all()
    assert cluster.store.resource_version == revision
    assert calls == []  # skipped outright: not even a read

    # A fault the operator does not act on still runs a pass (conservative), which writes nothing.
    cluster.faults.latency = 0.1
    cluster.operator.reconcile_all()
    assert sorted(calls) == ["dynamographdeployments", "nodes", "pods"]  # one read of each per pass
    assert cluster.store.resource_version == revision
    calls.clear()
    cluster.operator.reconcile_all()
    assert calls == []

    # Someone else's write runs the next pass; so does a frontend moved behind the operator's back.
    rt = cluster.store.type_of("nvidia.com", "dynamographdeployments")
    cluster.store.patch(rt, "v1beta1", "default", "one", {"metadata": {"labels": {"touched": "yes"}}},
                        "application/merge-patch+json", WriteOptions(manager="test"))
    cluster.operator.reconcile_all()
    assert "pods" in calls
    calls.clear()
    cluster.operator.frontends.remove("pass", "default", "two")
    cluster.operator.reconcile_all()
    assert "pods" in calls
    assert cluster.operator.frontends.get("pass", "default", "two") is not None


def test_two_deployments_competing_for_the_last_gpu_in_one_pass(reads):
    cluster = _cluster(nodes=1)
    _create(cluster, "base", gpus=7)
    _until(cluster, lambda: _state(cluster, "base") == "successful")
    _create(cluster, "x", gpus=1)
    _create(cluster, "y", gpus=1)
    calls = reads(cluster)

    cluster.operator.reconcile_all()  # one pass sees both
    assert calls.count("pods") == 1
    bound = [name for name in ("x", "y") if _worker(cluster, name)["spec"].get("nodeName")]
    assert bound == ["x"]
    assert cluster.gpus_in_use() == {"pass-h100-0": 8}
    waiting = _worker(cluster, "y")["status"]
    assert waiting["phase"] == "Pending" and waiting["conditions"][0]["reason"] == "Unschedulable"
    _until(cluster, lambda: _state(cluster, "x") == "successful")
    assert _state(cluster, "y") == "pending"


def test_gpus_freed_later_in_a_pass_reach_a_deployment_reconciled_earlier():
    cluster = _cluster(nodes=1)
    _create(cluster, "z-holder", gpus=8)
    _until(cluster, lambda: _state(cluster, "z-holder") == "successful")
    _create(cluster, "a-waiter", gpus=8)
    _until(cluster, lambda: _state(cluster, "a-waiter") == "pending")
    rt = cluster.store.type_of("nvidia.com", "dynamographdeployments")
    cluster.store.delete(rt, "v1beta1", "default", "z-holder")
    # The pass that frees the GPUs reconciles `a-waiter` first; nothing changes from outside after it,
    # yet the waiter gets the node and gets ready.
    _until(cluster, lambda: _state(cluster, "a-waiter") == "successful", passes=5)
    assert cluster.dgds() == [cluster.dgd("default", "a-waiter")]


def test_time_alone_still_moves_an_unchanged_cluster_on(reads):
    cluster = _cluster(delay=0.2)
    _create(cluster, "slow", gpus=2)
    calls = reads(cluster)
    states: list[str | None] = []

    def ready() -> bool:
        state = _state(cluster, "slow")
        if not states or states[-1] != state:
            states.append(state)
        return state == "successful"
    ticks = 0

    def counted_ready() -> bool:
        nonlocal ticks
        ticks += 1
        return ready()
    _until(cluster, counted_ready, pause=0.01)
    assert states == ["initializing", "pending", "successful"]
    assert calls.count("pods") < ticks  # the passes in between were skipped


def test_a_crash_loop_keeps_restarting_on_an_unchanged_cluster():
    cluster = _cluster(delay=0.05)
    cluster.faults.crash_loop = True
    cluster.faults.restart_interval = 0.05
    _create(cluster, "crash", gpus=2)

    def restarts() -> int:
        statuses = _worker(cluster, "crash").get("status", {}).get("containerStatuses") or [{}]
        return statuses[0].get("restartCount", 0)
    _until(cluster, lambda: restarts() >= 4, pause=0.01)
    assert _state(cluster, "crash") == "pending"

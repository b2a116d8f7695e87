from __future__ import annotations

import itertools

import pytest
from temporalio.testing import ActivityEnvironment

from activities.rollout import RolloutActivities
from sim.kube import SimulatedClusters
from wingsmith.adapters.kube import KubeconfigRef

CLUSTER = "sim-east"
_ids = itertools.count()


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with SimulatedClusters(home=tmp_path_factory.mktemp("sim"), operator_delay=0.3) as clusters:
        yield clusters


@pytest.fixture
def faults(sim):
    f = sim.faults(CLUSTER)
    f.reset()
    yield f
    f.reset()


@pytest.fixture
def kubeconfig(sim) -> KubeconfigRef:
    return KubeconfigRef(source=str(sim.kubeconfig_path), context=sim.context(CLUSTER))


@pytest.fixture
def workload_id() -> str:
    return f"rollout-test-{next(_ids)}"


@pytest.fixture
def acts() -> RolloutActivities:
    return RolloutActivities()


class Env:
    """ActivityEnvironment that keeps the heartbeats it saw."""

    def __init__(self) -> None:
        self.heartbeats: list = []
        self.env = ActivityEnvironment()
        self.env.on_heartbeat = lambda *details: self.heartbeats.append(details)

    def run(self, fn, arg):
        return self.env.run(fn, arg)


@pytest.fixture
def env() -> Env:
    return Env()

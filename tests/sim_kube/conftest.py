from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from sim.kube import SimulatedClusters, default_cluster_specs

DELAY = 0.3
_names = itertools.count()


@pytest.fixture(scope="package")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedClusters]:
    with SimulatedClusters(default_cluster_specs(), home=tmp_path_factory.mktemp("sim"), operator_delay=DELAY,
                           tick=0.02) as clusters:
        yield clusters


@pytest.fixture(autouse=True)
def _calm(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "sim" in request.fixturenames:
        clusters = request.getfixturevalue("sim")
        for name in clusters.names:
            clusters.faults(name).reset()


@pytest.fixture(scope="package")
def api(sim: SimulatedClusters) -> client.ApiClient:
    return sim.api_client("sim-east")


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def namespace(sim: SimulatedClusters, core: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards so its pods give their GPUs back."""
    name = f"t{next(_names)}-{int(time.time() * 1000) % 100000}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    for cluster in sim.names:  # injected faults must not break the clean-up
        sim.faults(cluster).reset()
    core.delete_namespace(name)
    deadline = time.monotonic() + 5
    while core.list_namespaced_pod(name).items and time.monotonic() < deadline:
        time.sleep(0.02)

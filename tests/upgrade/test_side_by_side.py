"""Two versions of one workload on one cluster: their names, their backends, and the traffic split."""

from __future__ import annotations

import pytest

from wingsmith.domain.dynamo import dgd_name
from wingsmith.domain.endpoints import BackendRef, ServingDeployment, routes_from_deployments


def test_a_revision_has_its_own_dgd_name_and_the_first_keeps_the_old_one():
    assert dgd_name("kimi", "sim-east") == "kimi-sim-east"  # deployments made before upgrades stay found
    assert dgd_name("kimi", "sim-east", 0) == "kimi-sim-east"
    assert dgd_name("kimi", "sim-east", 2) == "kimi-sim-east-r2"
    assert len({dgd_name("kimi", "sim-east", n) for n in range(5)}) == 5
    long = dgd_name("k" * 60, "sim-east", 3)
    assert len(long) <= 63 and long != dgd_name("k" * 60, "sim-east", 4)
    with pytest.raises(ValueError):
        dgd_name("kimi", "sim-east", -1)


def test_backend_ids_carry_the_revision_and_read_back():
    old, new = BackendRef(cluster="sim-east", workload_id="kimi"), BackendRef(cluster="sim-east", workload_id="kimi",
                                                                               revision=1)
    assert old.id == "sim-east/kimi" and new.id == "sim-east/kimi/r1"
    routes = routes_from_deployments("kimi-k3", [_dep("sim-east", 0, 2), _dep("sim-east", 1, 2)], [True, True],
                                     draining_workloads=[], draining_backends=[])
    assert [BackendRef.of(b) for b in routes.backends] == [old, new]


def _dep(cluster: str, revision: int, replicas: int, split: int | None = None) -> ServingDeployment:
    return ServingDeployment(workload_id="kimi", cluster=cluster, replicas=replicas, revision=revision,
                             frontend_url=f"http://{cluster}-{revision}.test", served_model_name="kimi-k3",
                             split_percent=split)


def _weights(deps: list[ServingDeployment], draining: list[BackendRef] | None = None) -> dict[str, int]:
    routes = routes_from_deployments("kimi-k3", deps, [True] * len(deps), draining_workloads=[],
                                     draining_backends=draining or [])
    return {b.id: b.weight for b in routes.backends}


def test_without_a_split_weights_follow_replicas():
    assert _weights([_dep("sim-east", 0, 2), _dep("sim-west", 0, 1)]) == {"sim-east/kimi": 2, "sim-west/kimi": 1}


@pytest.mark.parametrize(("percent", "expected"), [
    (0, {"sim-east/kimi": 2, "sim-east/kimi/r1": 0, "sim-west/kimi": 1}),  # the new one is up, takes nothing
    (10, {"sim-east/kimi": 18, "sim-east/kimi/r1": 2, "sim-west/kimi": 10}),
    (50, {"sim-east/kimi": 2, "sim-east/kimi/r1": 2, "sim-west/kimi": 2}),
    (100, {"sim-east/kimi": 0, "sim-east/kimi/r1": 2, "sim-west/kimi": 1}),
])
def test_a_split_shares_the_clusters_weight_and_keeps_other_clusters_in_proportion(percent, expected):
    deps = [_dep("sim-east", 0, 2, 100 - percent), _dep("sim-east", 1, 2, percent), _dep("sim-west", 0, 1)]
    weights = _weights(deps)
    assert weights == expected
    east = weights["sim-east/kimi"] + weights["sim-east/kimi/r1"]
    assert weights["sim-east/kimi/r1"] * 100 == east * percent  # exactly the percent asked
    assert east == 2 * weights["sim-west/kimi"]  # the cluster keeps its replica share


def test_one_replica_cluster_split_ten_percent_still_sends_some():
    assert _weights([_dep("sim-east", 0, 1, 90), _dep("sim-east", 1, 1, 10)]) == {"sim-east/kimi": 9,
                                                                                   "sim-east/kimi/r1": 1}


def test_a_draining_version_gets_zero_whatever_its_split():
    old = BackendRef(cluster="sim-east", workload_id="kimi")
    assert _weights([_dep("sim-east", 0, 2, 50), _dep("sim-east", 1, 2, 50)], draining=[old]) == {
        "sim-east/kimi": 0, "sim-east/kimi/r1": 2}

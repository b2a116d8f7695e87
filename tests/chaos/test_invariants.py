"""The chaos run's invariants on their own, with tables: each must flag what it exists to catch
(a duplicate or orphaned DGD, a registry that disagrees with the workflow, a stale gateway route)."""

from __future__ import annotations

import pytest

from contracts.workload import ClusterState, WorkloadStatus
from tests.chaos.harness import dgd_problems, registry_problems, route_problems, serving_pairs


def status(name: str, stage: str, **clusters: str) -> WorkloadStatus:
    return WorkloadStatus(workload_id=name, stage=stage, replicas=1, served_model_name=name,
                          clusters=[ClusterState(cluster=c, replicas=1, state=s) for c, s in clusters.items()])


STATUSES = {
    "a": status("a", "serving", **{"sim-east": "serving"}),
    "b": status("b", "serving", **{"sim-west": "serving", "sim-nvl": "failed"}),
    "c": status("c", "failed"),
}


def test_serving_pairs_are_the_clusters_each_workflow_says_serve():
    assert serving_pairs(STATUSES) == {("a", "sim-east"), ("b", "sim-west")}
    assert serving_pairs({"x": None}) == set()


@pytest.mark.parametrize("found, want", [
    ({("a", "sim-east"): ["a-sim-east"], ("b", "sim-west"): ["b-sim-west"]}, []),
    ({("a", "sim-east"): ["a-sim-east"]}, ["workload b on sim-west: 0 DGDs, want exactly 1"]),
    ({("a", "sim-east"): ["a-sim-east", "a-sim-east-2"], ("b", "sim-west"): ["b-sim-west"]},
     ["workload a on sim-east: 2 DGDs, want exactly 1"]),
    ({("a", "sim-east"): ["a-sim-east"], ("b", "sim-west"): ["b-sim-west"], ("b", "sim-nvl"): ["b-sim-nvl"]},
     ["workload b on sim-nvl: orphaned DGD(s) ['b-sim-nvl']"]),
    ({("a", "sim-east"): ["a-sim-east"], ("b", "sim-west"): ["b-sim-west"], ("c", "sim-east"): ["c-sim-east"]},
     ["workload c on sim-east: orphaned DGD(s) ['c-sim-east']"]),
])
def test_exactly_one_dgd_where_a_workload_serves_and_none_elsewhere(found, want):
    assert dgd_problems(found, serving_pairs(STATUSES)) == want


def test_after_teardown_every_dgd_left_is_an_orphan():
    assert dgd_problems({("a", "sim-east"): ["a-sim-east"]}, set()) == [
        "workload a on sim-east: orphaned DGD(s) ['a-sim-east']"]
    assert dgd_problems({}, set()) == []


@pytest.mark.parametrize("rows, recorded, want", [
    ({"a": "serving", "b": "serving", "c": "failed"}, {("a", "sim-east"), ("b", "sim-west")}, []),
    ({"a": "rolling_out", "b": "serving", "c": "failed"}, {("a", "sim-east"), ("b", "sim-west")},
     ["workload a: registry says rolling_out, workflow says serving"]),
    ({"a": "serving", "b": "serving"}, {("a", "sim-east"), ("b", "sim-west")},
     ["workload c: registry says None, workflow says failed"]),
    ({"a": "serving", "b": "serving", "c": "failed"}, {("a", "sim-east"), ("b", "sim-west"), ("b", "sim-nvl")},
     ["workload b: registry serves on ['sim-nvl', 'sim-west'], workflow on ['sim-west']"]),
    ({"a": "serving", "b": "serving", "c": "failed"}, {("b", "sim-west")},
     ["workload a: registry serves on [], workflow on ['sim-east']"]),
])
def test_the_registry_must_agree_with_each_workflow(rows, recorded, want):
    assert registry_problems(STATUSES, rows, recorded) == want


ENDPOINTS = {"ep-0": ["a", "b"], "ep-1": ["c"]}


@pytest.mark.parametrize("routes, want", [
    ({"ep-0": {"sim-east/a", "sim-west/b"}}, []),
    ({"ep-0": {"sim-east/a"}}, ["endpoint ep-0: gateway routes ['sim-east/a'], serving ['sim-east/a', 'sim-west/b']"]),
    ({"ep-0": {"sim-east/a", "sim-west/b", "sim-nvl/b"}},
     ["endpoint ep-0: gateway routes ['sim-east/a', 'sim-nvl/b', 'sim-west/b'], serving ['sim-east/a', 'sim-west/b']"]),
    ({"ep-0": {"sim-east/a", "sim-west/b"}, "ep-1": {"sim-east/c"}},
     ["endpoint ep-1: gateway routes ['sim-east/c'], serving []"]),
    ({"ep-0": {"sim-east/a", "sim-west/b"}, "gone": {"sim-east/a"}}, ["gateway route gone belongs to no endpoint"]),
])
def test_each_endpoint_routes_to_exactly_its_serving_deployments(routes, want):
    assert route_problems(routes, serving_pairs(STATUSES), ENDPOINTS) == want

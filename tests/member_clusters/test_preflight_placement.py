"""A failed preflight keeps a cluster registered but unplaceable: the registry records the checklist, the
workflows' cluster list carries the reason (so every placement, not only the API's dry run, rules it out),
placement says why under its own `preflight` filter, and a fleet's clusters failing the same checks are
one group; a passing check, or never a check, leaves the cluster placeable."""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio.testing import ActivityEnvironment

from activities.workload import WorkloadActivities
from contracts.workload import NoInput
from wingsmith.adapters.store import clusters as store
from wingsmith.adapters.store.clusters import ClusterSpec, fleet_offer
from wingsmith.domain.member_clusters import CheckLine, Preflight
from wingsmith.domain.placement import ClusterInfo, ClusterInventory, NodePool, PlacementPlan, place

NO_SECRET = Preflight(checked_at=datetime(2026, 1, 1, tzinfo=UTC), lines=[
    CheckLine(check="api_server", status="pass", detail="answers"),
    CheckLine(check="hub_token_secret", status="fail", detail="Secret hf-token is not in namespace default",
              fix="kubectl -n default create secret generic hf-token --from-literal=HF_TOKEN=<token>"),
    CheckLine(check="dynamo_operator", status="warn", detail="no pod labelled app.kubernetes.io/name=dynamo-operator")])
PASSED = NO_SECRET.model_copy(update={"lines": [NO_SECRET.lines[0], NO_SECRET.lines[2]]})


def inventory(name: str) -> ClusterInventory:
    return ClusterInventory(cluster=name, pools=[NodePool(hardware_id="h200", product="NVIDIA-H200", gpus_per_node=8,
                                                          free_gpus=8, nodes=2)])


def test_placement_rules_out_a_cluster_that_failed_its_preflight_saying_why():
    reason = NO_SECRET.unplaceable_reason()
    assert reason == ("its preflight check failed (hub_token_secret: Secret hf-token is not in namespace default); "
                      "`wingsmith clusters check` shows the fixes")
    assert PASSED.unplaceable_reason() is None  # a warning alone does not keep a cluster out
    names = ["a", "b", "c", "d"]
    infos = [ClusterInfo(name=n, unplaceable=reason if n in ("b", "c") else None) for n in names]
    plan = PlacementPlan(hardware="h200", gpus_per_node=8, replicas=4)
    decision = place(plan, [inventory(n) for n in names], infos)
    assert decision.replicas == {"a": 2, "d": 2}
    assert [(g.filter, g.reason, g.clusters) for g in decision.ruled_out] == [("preflight", reason, ["b", "c"])]
    explained = place(plan.model_copy(update={"replicas": 6}), [inventory(n) for n in names], infos, explain=True)
    verdict = next(v for v in explained.clusters if v.cluster == "b")
    assert [f.name for f in verdict.filters if not f.passed] == ["preflight"]
    assert verdict.unplaced_reason == f"filtered out by preflight: {reason}"
    assert f"b: filtered out by preflight: {reason}" in explained.summary


async def test_the_registry_and_the_workflows_cluster_list_carry_the_checklist(pg_pool):
    await pg_pool.execute("delete from clusters")
    for name in ("failed", "passed", "unchecked"):
        await store.create_cluster(pg_pool, ClusterSpec(name=name, kubeconfig="env:KUBECONFIG_X",
                                                        manual_inventory={"pools": [{"hardware": "h200", "nodes": 1}]}))
    assert (await store.set_preflight(pg_pool, "failed", NO_SECRET)).preflight == NO_SECRET
    await store.set_preflight(pg_pool, "passed", PASSED)
    assert await store.set_preflight(pg_pool, "nowhere", PASSED) is None
    targets = await ActivityEnvironment().run(WorkloadActivities(pg_pool).list_clusters, NoInput())
    unplaceable = {t.info.name: t.info.unplaceable for t in targets.clusters}
    assert unplaceable == {"failed": NO_SECRET.unplaceable_reason(), "passed": None, "unchecked": None}
    # A cluster that takes no replicas offers no card to plans sized from a traffic target.
    records = await store.list_clusters(pg_pool)
    assert fleet_offer(records) == {"h200": None}
    assert fleet_offer([r for r in records if r.name == "failed"]) == {}
    # The same settings again (a retried registration) keep the checklist.
    again, created = await store.create_cluster(pg_pool, ClusterSpec(
        name="failed", kubeconfig="env:KUBECONFIG_X", manual_inventory={"pools": [{"hardware": "h200", "nodes": 1}]}))
    assert not created and again.preflight == NO_SECRET

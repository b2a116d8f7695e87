"""The watch's look against the simulated clusters, through the real kubernetes client, and the
verdicts its observations lead to: the same path the watch takes."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from kubernetes import client
from temporalio.testing import ActivityEnvironment

from activities.observe import ObserveActivities, ObserveDeploymentInput, SharedReads, last_heard
from activities.rollout import RolloutActivities
from contracts.rollout import ApplyInput, ApplyOutput, WaitReadyInput
from sim.kube import SimulatedClusters
from tests.dynamo.builders import small_spec
from wingsmith.adapters.kube import KubeconfigRef
from wingsmith.domain.dynamo import GROUP, PLURAL, VERSION, render_dgd
from wingsmith.domain.dynamo.render import SPEC_HASH_ANNOTATION
from wingsmith.domain.reconcile import Applied, Observation, judge

CLUSTER = "sim-east"
_ids = itertools.count()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedClusters]:
    with SimulatedClusters(home=tmp_path_factory.mktemp("sim"), operator_delay=0.2) as clusters:
        yield clusters


@pytest.fixture
def kubeconfig(sim: SimulatedClusters) -> Iterator[KubeconfigRef]:
    yield KubeconfigRef(source=str(sim.kubeconfig_path), context=CLUSTER)
    sim.faults(CLUSTER).reset()


@pytest.fixture
def custom(sim: SimulatedClusters) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(sim.api_client(CLUSTER))


def _serving(kubeconfig: KubeconfigRef) -> tuple[Applied, ApplyOutput]:
    spec = small_spec(workload_id=f"watched-{next(_ids)}", served_model_name="watched")
    env, acts = ActivityEnvironment(), RolloutActivities()
    out = env.run(acts.apply, ApplyInput(kubeconfig=kubeconfig, spec=spec))
    env.run(acts.wait_ready, WaitReadyInput(kubeconfig=kubeconfig, name=out.name, namespace=out.namespace,
                                            generation=out.generation, deadline_seconds=20, poll_seconds=0.05))
    stamped = render_dgd(spec)["metadata"]["annotations"][SPEC_HASH_ANNOTATION]
    applied = Applied(cluster=CLUSTER, dgd_name=out.name, namespace=out.namespace, spec_hash=stamped,
                      generation=out.generation, replicas=1, served_model_name="watched")
    return applied, out


def _input(kubeconfig: KubeconfigRef, applied: Applied, probe: bool = True, **wait: Any) -> ObserveDeploymentInput:
    return ObserveDeploymentInput(cluster=CLUSTER, kubeconfig=kubeconfig, name=applied.dgd_name,
                                  namespace=applied.namespace,
                                  served_model_name=applied.served_model_name if probe else None,
                                  probe_timeout_seconds=2, **wait)


def _look(kubeconfig: KubeconfigRef, applied: Applied, probe: bool = True) -> Observation:
    """A first look (nothing known yet): it answers after one read."""
    return asyncio.run(ActivityEnvironment().run(ObserveActivities().observe, _input(kubeconfig, applied, probe)))


def test_a_serving_deployment_looks_as_applied(kubeconfig: KubeconfigRef) -> None:
    applied, out = _serving(kubeconfig)
    seen = _look(kubeconfig, applied)
    assert seen.exists and seen.reachable and seen.ready and seen.uid == out.uid
    assert (seen.generation, seen.observed_generation, seen.ready_replicas) == (1, 1, 1)
    assert seen.spec_hash == seen.live_spec_hash == applied.spec_hash
    assert seen.frontend is not None and seen.frontend.models == ["watched"]
    assert judge(applied, seen).action == "ok"
    # Looking changes nothing: a second look (a retried activity) sees the same thing.
    again = _look(kubeconfig, applied)
    assert again.model_dump(exclude={"at"}) == seen.model_dump(exclude={"at"})
    assert _look(kubeconfig, applied, probe=False).frontend is None


def test_a_deployment_deleted_out_of_band_is_missing(kubeconfig: KubeconfigRef, custom: client.CustomObjectsApi,
                                                     sim: SimulatedClusters) -> None:
    applied, _ = _serving(kubeconfig)
    custom.delete_namespaced_custom_object(GROUP, VERSION, applied.namespace, PLURAL, applied.dgd_name)
    deadline = time.monotonic() + 10
    seen = _look(kubeconfig, applied)
    while seen.exists and time.monotonic() < deadline:
        assert seen.deleting  # the finalizer holds it a moment: being deleted, not serving
        assert judge(applied, seen).health == "degraded"
        seen = _look(kubeconfig, applied)
    assert not seen.exists and seen.frontend is None
    verdict = judge(applied, seen)
    assert (verdict.action, verdict.cause) == ("reapply", "deployment missing")


def test_a_spec_edited_out_of_band_is_drift(kubeconfig: KubeconfigRef, custom: client.CustomObjectsApi) -> None:
    applied, _ = _serving(kubeconfig)
    live = cast(dict[str, Any], custom.get_namespaced_custom_object(GROUP, VERSION, applied.namespace, PLURAL,
                                                                    applied.dgd_name))
    components = live["spec"]["components"]
    components[1]["replicas"] = 2  # someone scaled it by hand
    custom.patch_namespaced_custom_object(GROUP, VERSION, applied.namespace, PLURAL, applied.dgd_name,
                                          {"spec": {"components": components}})
    seen = _look(kubeconfig, applied, probe=False)
    assert seen.generation == 2 and seen.spec_hash == applied.spec_hash and seen.live_spec_hash != applied.spec_hash
    heal = judge(applied, seen)
    assert heal.action == "reapply" and "generation 2, applied 1" in (heal.cause or "")
    assert judge(applied, seen, policy="report").action in ("report", "wait")


def test_a_cluster_that_does_not_answer_is_unreachable_not_an_error(kubeconfig: KubeconfigRef,
                                                                   sim: SimulatedClusters) -> None:
    applied, _ = _serving(kubeconfig)
    sim.faults(CLUSTER).api_error_rate = 1.0
    seen = _look(kubeconfig, applied)
    assert not seen.reachable and "ServerError" in (seen.error or "")
    assert judge(applied, seen).action == "wait"
    missing_config = KubeconfigRef(source=str(sim.kubeconfig_path.parent / "absent"), context=CLUSTER)
    seen = _look(missing_config, applied)
    assert not seen.reachable and "KubeconfigMissing" in (seen.error or "")


def test_a_frontend_that_stops_serving_the_name_is_seen(kubeconfig: KubeconfigRef, sim: SimulatedClusters) -> None:
    applied, _ = _serving(kubeconfig)
    wrong = applied.model_copy(update={"served_model_name": "not-served"})
    seen = _look(kubeconfig, wrong)
    assert seen.ready and seen.frontend is not None and seen.frontend.models == ["watched"]
    assert "does not answer 'not-served' (lists ['watched'])" in (judge(wrong, seen).cause or "")
    sim.faults(CLUSTER).operator_failed = True  # the frontend runs, but no worker registers with it
    deadline = time.monotonic() + 5
    while seen.frontend and seen.frontend.models and time.monotonic() < deadline:
        seen = _look(kubeconfig, applied)
    assert seen.frontend is not None and seen.frontend.models == []
    assert judge(applied, seen).health == "degraded"


def test_a_slow_answer_is_waited_for_while_the_look_heartbeats(sim: SimulatedClusters,
                                                                 kubeconfig: KubeconfigRef) -> None:
    """A slow API is slow, not unreachable: the look waits, heartbeating meanwhile, so the workflow
    does not take it for a look whose worker was lost."""
    applied, _ = _serving(kubeconfig)
    sim.faults(CLUSTER).update({"latency": 2.5})
    beats: list[tuple[Any, ...]] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    seen = asyncio.run(env.run(ObserveActivities().observe, _input(kubeconfig, applied, probe=False)))
    assert seen.reachable and seen.exists and judge(applied, seen).action == "ok"
    assert len(beats) >= 2, f"one heartbeat at most during a 2.5 s answer: {beats}"
    assert last_heard(beats[0]) is None  # nothing read yet when the look began


def test_a_look_answers_on_news_and_heartbeats_its_last_read(kubeconfig: KubeconfigRef,
                                                             custom: client.CustomObjectsApi) -> None:
    """Told what the workflow knows, a look stays quiet while nothing changes (heartbeating the time of
    each read), and answers as soon as something `judge` can tell apart does."""
    applied, _ = _serving(kubeconfig)
    known = _look(kubeconfig, applied).news_key()
    beats: list[tuple[Any, ...]] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    params = _input(kubeconfig, applied, known=known, status_seconds=0.2, probe_seconds=0.5, report_seconds=60)

    async def delete_later() -> Observation:
        look = asyncio.ensure_future(env.run(ObserveActivities().observe, params))
        await asyncio.sleep(4.5)  # heartbeats at 1, 2, 3 and 4 s
        assert not look.done(), "answered without news"
        await asyncio.to_thread(custom.delete_namespaced_custom_object, GROUP, VERSION, applied.namespace, PLURAL,
                                applied.dgd_name)
        return await asyncio.wait_for(look, 5)
    started = time.monotonic()
    seen = asyncio.run(delete_later())
    assert seen.news_key() != known and (seen.deleting or not seen.exists)
    assert judge(applied, seen).health == "degraded" and time.monotonic() - started < 6.5
    reads = [last_heard(b) for b in beats]
    assert all(isinstance(r, datetime) for r in reads[1:]) and reads[-1] and reads[1] and reads[-1] > reads[1]


def test_a_look_without_news_answers_after_the_report_period(kubeconfig: KubeconfigRef) -> None:
    applied, _ = _serving(kubeconfig)
    known = _look(kubeconfig, applied).news_key()
    started = time.monotonic()
    seen = asyncio.run(ActivityEnvironment().run(ObserveActivities().observe, _input(
        kubeconfig, applied, known=known, status_seconds=0.2, probe_seconds=0.5, report_seconds=1.0)))
    assert 1.0 <= time.monotonic() - started < 3 and seen.news_key() == known


def test_a_retried_look_keeps_the_first_attempts_period_and_last_read(kubeconfig: KubeconfigRef) -> None:
    """The server starts a look again when its worker was lost: the new attempt answers when the first
    attempt's report period ends, not a whole period later, and heartbeats the last read it inherited
    until it reads itself."""
    applied, _ = _serving(kubeconfig)
    known = _look(kubeconfig, applied).news_key()
    params = _input(kubeconfig, applied, known=known, status_seconds=0.2, probe_seconds=0.5, report_seconds=3.0)
    earlier = "2026-01-01T00:00:00+00:00"

    def retried(scheduled_ago: float) -> ActivityEnvironment:
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, attempt=2, heartbeat_details=[earlier],
                                       scheduled_time=datetime.now(UTC) - timedelta(seconds=scheduled_ago))
        return env

    env = retried(2.0)
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    started = time.monotonic()
    seen = asyncio.run(env.run(ObserveActivities().observe, params))
    assert 0.8 <= time.monotonic() - started < 2.5 and seen.news_key() == known  # ~1 s left of its 3
    assert beats and beats[0] == (earlier,)
    started = time.monotonic()
    asyncio.run(retried(10.0).run(ObserveActivities().observe, params))  # past its period: the first read answers
    assert time.monotonic() - started < 0.8


def test_looks_at_one_cluster_share_one_read_per_period() -> None:
    reads: list[float] = []

    def read(ref: KubeconfigRef, namespace: str) -> dict[str, dict[str, Any]]:
        reads.append(time.monotonic())
        time.sleep(0.05)
        return {}
    shared = SharedReads(read)
    ref = KubeconfigRef(source="/fake/kubeconfig", context=CLUSTER)

    async def many() -> None:
        await asyncio.gather(*(shared.get(ref, "default", 10) for _ in range(200)))
        await asyncio.gather(*(shared.get(ref, "default", 10) for _ in range(200)))
        await shared.get(ref, "other", 10)
    asyncio.run(many())
    assert len(reads) == 2  # 400 looks in one namespace, one in another


def test_a_look_asked_to_answer_at_once_gets_no_read_older_than_itself() -> None:
    """After a change (a heal's apply), the workflow's next look must see the cluster after it: a read
    shared by others but started before that look is not good enough, one in flight is waited out."""
    reads: list[float] = []

    def read(ref: KubeconfigRef, namespace: str) -> dict[str, dict[str, Any]]:
        reads.append(time.monotonic())
        time.sleep(0.2)
        return {"n": {"read": len(reads)}}
    shared = SharedReads(read)
    ref = KubeconfigRef(source="/fake/kubeconfig", context=CLUSTER)

    async def scenario() -> tuple[int, int, int]:
        first = asyncio.ensure_future(shared.get(ref, "default", 10))
        await asyncio.sleep(0.05)  # that read is in flight
        now = time.monotonic()
        fresh, shared_one = await asyncio.gather(shared.get(ref, "default", 10, now), shared.get(ref, "default", 10))
        await first
        again = await shared.get(ref, "default", 10, now)  # the read after `now` is reused
        answers = [fresh[1], shared_one[1], again[1]]
        assert all(isinstance(a, dict) for a in answers)
        a, b, c = (cast(dict[str, dict[str, Any]], x)["n"]["read"] for x in answers)
        return a, b, c
    assert asyncio.run(scenario()) == (2, 1, 2) and len(reads) == 2

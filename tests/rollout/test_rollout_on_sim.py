"""The rollout activities through the real kubernetes client against the simulated clusters."""

from __future__ import annotations

import time

import pytest
from temporalio.exceptions import ApplicationError

from activities.rollout import RolloutActivities
from contracts.rollout import ApplyInput, DeleteInput, ProbeFrontendInput, WaitReadyInput
from tests.dynamo.builders import small_spec
from tests.rollout.conftest import CLUSTER
from wingsmith.adapters.kube import DgdClient, KubeconfigRef, new_api_client
from wingsmith.domain.dynamo import WorkerPool, dgd_name
from wingsmith.domain.dynamo.readiness import evaluate_readiness


def apply(env, acts, kubeconfig, spec):
    return env.run(acts.apply, ApplyInput(kubeconfig=kubeconfig, spec=spec))


def wait(env, acts, kubeconfig, applied, **kw):
    kw.setdefault("deadline_seconds", 20)
    kw.setdefault("poll_seconds", 0.1)
    return env.run(acts.wait_ready, WaitReadyInput(
        kubeconfig=kubeconfig, name=applied.name, namespace=applied.namespace,
        generation=applied.generation, **kw))


def delete(env, acts, kubeconfig, name, namespace="default"):
    return env.run(acts.delete, DeleteInput(kubeconfig=kubeconfig, name=name, namespace=namespace,
                                            timeout_seconds=20, poll_seconds=0.1))


def test_applying_twice_leaves_one_object_with_the_same_generation(sim, faults, kubeconfig, workload_id, acts, env):
    spec = small_spec(workload_id=workload_id)
    first = apply(env, acts, kubeconfig, spec)
    wait(env, acts, kubeconfig, first)
    second = apply(env, acts, kubeconfig, spec)
    assert (second.uid, second.generation) == (first.uid, first.generation) == (first.uid, 1)
    assert second.name == dgd_name(workload_id, CLUSTER)
    mine = sim.cluster(CLUSTER).dgds("default", labels=f"wingsmith.dev/workload={workload_id}")
    assert [d["metadata"]["name"] for d in mine] == [first.name]
    delete(env, acts, kubeconfig, first.name)


def test_a_spec_change_bumps_the_generation_and_readiness_waits_for_it(sim, faults, kubeconfig, workload_id,
                                                                       acts, env):
    first = apply(env, acts, kubeconfig, small_spec(workload_id=workload_id))
    wait(env, acts, kubeconfig, first)
    changed = small_spec(workload_id=workload_id, draft_version=2, max_num_seqs=128)
    second = apply(env, acts, kubeconfig, changed)
    assert second.generation == first.generation + 1 and second.uid == first.uid
    # Right after the change the object still says successful, but for the old generation.
    with DgdClient(new_api_client(kubeconfig)) as kube:
        assert not evaluate_readiness(kube.get(second.name, "default"), second.generation).ready
    done = wait(env, acts, kubeconfig, second)
    assert done.generation == 2 and done.state == "successful" and done.polls > 1
    obj = sim.cluster(CLUSTER).dgd("default", second.name)
    assert obj["status"]["observedGeneration"] == 2
    args = obj["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["args"]
    assert args[args.index("--max-num-seqs") + 1] == "128"
    delete(env, acts, kubeconfig, second.name)


@pytest.mark.parametrize(("fault", "kind", "reason"), [
    ("crash_loop", "PodCrashLooping", "CrashLoopBackOff"),
    ("image_pull", "ImagePullFailed", "ImagePull"),
    ("oom_killed", "OutOfMemory", "OOMKilled"),
])
def test_a_hopeless_deployment_fails_within_seconds_with_the_pod_reason(sim, faults, kubeconfig, workload_id,
                                                                        acts, env, fault, kind, reason):
    setattr(faults, fault, True)
    applied = apply(env, acts, kubeconfig, small_spec(workload_id=workload_id))
    started = time.monotonic()
    with pytest.raises(ApplicationError) as info:
        wait(env, acts, kubeconfig, applied, deadline_seconds=60)
    assert time.monotonic() - started < 10
    assert info.value.type == kind and info.value.non_retryable
    assert reason in str(info.value) and f"pod {applied.name}" in str(info.value)
    faults.reset()
    delete(env, acts, kubeconfig, applied.name)


def test_operator_failed_is_a_non_retryable_failure(sim, faults, kubeconfig, workload_id, acts, env):
    faults.operator_failed = True
    applied = apply(env, acts, kubeconfig, small_spec(workload_id=workload_id))
    with pytest.raises(ApplicationError) as info:
        wait(env, acts, kubeconfig, applied)
    assert info.value.type == "DeploymentFailed" and info.value.non_retryable
    faults.reset()
    delete(env, acts, kubeconfig, applied.name)


def test_never_ready_hits_the_deadline_and_heartbeats_progress(sim, faults, kubeconfig, workload_id, acts, env):
    faults.never_ready = True
    applied = apply(env, acts, kubeconfig, small_spec(workload_id=workload_id))
    with pytest.raises(ApplicationError) as info:
        wait(env, acts, kubeconfig, applied, deadline_seconds=1.0, poll_seconds=0.2)
    assert info.value.type == "ReadyDeadlineExceeded" and info.value.non_retryable
    assert len(env.heartbeats) >= 3
    progress = env.heartbeats[-1][0]
    assert progress["deadline_seconds"] == 1.0 and "state=" in progress["status"] and "ready" in progress["pods"]
    faults.reset()
    delete(env, acts, kubeconfig, applied.name)


def test_pods_that_find_no_node_give_the_cluster_up_after_the_grace(sim, faults, kubeconfig, workload_id,
                                                                    acts, env):
    # sim-east has 4 nodes of 8 H200: a fifth 8-GPU worker fits nowhere, as when another deployment
    # took the GPUs that placement counted on.
    spec = small_spec(workload_id=workload_id,
                      worker=WorkerPool(args=["--tensor-parallel-size", "8"], gpus_per_node=8, replicas=5))
    applied = apply(env, acts, kubeconfig, spec)
    started = time.monotonic()
    with pytest.raises(ApplicationError) as info:
        wait(env, acts, kubeconfig, applied, deadline_seconds=60, unschedulable_grace_seconds=1.0)
    assert time.monotonic() - started < 10
    assert info.value.type == "Unschedulable" and info.value.non_retryable
    assert "Insufficient nvidia.com/gpu" in str(info.value) and "found no node for" in str(info.value)
    delete(env, acts, kubeconfig, applied.name)
    # A pod that waits for a node only briefly is not given up on: the deployment becomes ready.
    first = apply(env, acts, kubeconfig, small_spec(workload_id=workload_id + "-fits"))
    assert wait(env, acts, kubeconfig, first, unschedulable_grace_seconds=5.0).state == "successful"
    delete(env, acts, kubeconfig, first.name)


@pytest.mark.parametrize("rates", [{"api_error_rate": 0.3}, {"api_error_rate": 0.3, "conflict_rate": 0.3}])
def test_with_flaky_api_calls_the_rollout_still_converges(sim, faults, kubeconfig, workload_id, acts, env, rates):
    faults.update({**rates, "seed": 7})
    for _ in range(2):  # apply twice: the second is the idempotent re-apply of a retried activity
        applied = apply(env, acts, kubeconfig, small_spec(workload_id=workload_id))
    done = wait(env, acts, kubeconfig, applied)
    assert done.state == "successful" and applied.generation == 1
    assert delete(env, acts, kubeconfig, applied.name).existed
    faults.reset()
    assert sim.cluster(CLUSTER).dgds("default", labels=f"wingsmith.dev/workload={workload_id}") == []


def test_deleting_twice_is_fine(sim, faults, kubeconfig, workload_id, acts, env):
    applied = apply(env, acts, kubeconfig, small_spec(workload_id=workload_id))
    wait(env, acts, kubeconfig, applied)
    first = delete(env, acts, kubeconfig, applied.name)
    second = delete(env, acts, kubeconfig, applied.name)
    assert first.existed and not second.existed
    assert sim.cluster(CLUSTER).pods("default", labels=f"nvidia.com/dynamo-graph-deployment-name={applied.name}") == []


def test_probe_finds_the_served_model_on_the_frontend(sim, faults, kubeconfig, workload_id, acts, env):
    applied = apply(env, acts, kubeconfig, small_spec(workload_id=workload_id, served_model_name="qwen-small"))
    wait(env, acts, kubeconfig, applied)
    out = env.run(acts.probe_frontend, ProbeFrontendInput(
        kubeconfig=kubeconfig, name=applied.name, namespace="default", served_model_name="qwen-small",
        timeout_seconds=10, poll_seconds=0.1))
    assert "qwen-small" in out.models and out.url.startswith(sim.base_url)
    with pytest.raises(ApplicationError) as info:
        env.run(acts.probe_frontend, ProbeFrontendInput(url=out.url, served_model_name="not-served",
                                                        timeout_seconds=0.3, poll_seconds=0.1))
    assert info.value.type == "FrontendNotServing" and "qwen-small" in str(info.value)
    delete(env, acts, kubeconfig, applied.name)


def test_a_missing_deployment_fails_the_probe_at_once_without_inventing_an_address(sim, faults, kubeconfig,
                                                                                 workload_id, acts, env):
    started = time.monotonic()
    with pytest.raises(ApplicationError) as info:
        env.run(acts.probe_frontend, ProbeFrontendInput(
            kubeconfig=kubeconfig, name=dgd_name(workload_id, CLUSTER), namespace="default",
            served_model_name="anything", timeout_seconds=600, poll_seconds=0.1))
    assert info.value.type == "DeploymentMissing" and info.value.non_retryable
    assert "deployment missing" in str(info.value) and "svc.cluster.local" not in str(info.value)
    assert time.monotonic() - started < 5


class _CorruptingClient(DgdClient):
    """Sends a manifest the CRD schema rejects, to see the API server's 422 come back."""

    def apply(self, manifest):
        manifest["spec"]["components"][1]["multinode"] = {"nodeCount": 1}
        return super().apply(manifest)


def test_schema_rejection_is_not_retryable(sim, faults, kubeconfig, workload_id, env):
    acts = RolloutActivities(client_factory=lambda ref: _CorruptingClient(new_api_client(ref)))
    with pytest.raises(ApplicationError) as info:
        apply(env, acts, kubeconfig, small_spec(workload_id=workload_id))
    assert info.value.type == "SchemaRejected" and info.value.non_retryable
    assert "nodeCount" in str(info.value)


def test_a_bad_kubeconfig_reference_fails_clearly_without_leaking(tmp_path, sim, acts, env, workload_id):
    with pytest.raises(ApplicationError) as info:
        apply(env, acts, KubeconfigRef(source=str(tmp_path / "nope")), small_spec(workload_id=workload_id))
    assert info.value.type == "KubeconfigMissing" and info.value.non_retryable
    with pytest.raises(ApplicationError) as info:
        apply(env, acts, KubeconfigRef(source=str(sim.kubeconfig_path), context="no-such-cluster"),
              small_spec(workload_id=workload_id))
    assert info.value.type == "KubeconfigInvalid" and info.value.non_retryable
    token = sim.cluster(CLUSTER).token
    assert token not in str(info.value)


def test_an_impossible_rollout_is_refused_before_any_call(sim, kubeconfig, acts, env, workload_id):
    spec = small_spec(workload_id=workload_id, worker=WorkerPool(args=["--tensor-parallel-size", "2"], gpus_per_node=1))
    with pytest.raises(ApplicationError) as info:
        apply(env, acts, kubeconfig, spec)
    assert info.value.type == "RanksMismatch" and info.value.non_retryable
    assert "TP 2 × PP 1 × DP 1 = 2 ranks but its worker reserves 1 node(s) × 1 GPUs = 1" in str(info.value)


def test_a_multi_node_dep_command_with_a_tp_left_beside_its_dp_is_refused_before_any_call(sim, kubeconfig, acts, env,
                                                                                          workload_id):
    # The shape issue 48 found: TP 8 from a recipe's base args beside DEP's DP 16 on 2 × 8 GPUs.
    args = ["--tensor-parallel-size", "8", "--data-parallel-size", "16", "--data-parallel-size-local", "8",
            "--enable-expert-parallel"]
    spec = small_spec(workload_id=workload_id, layout="multi_node_dep", hardware_id="h200",
                      worker=WorkerPool(args=args, gpus_per_node=8, nodes=2))
    with pytest.raises(ApplicationError) as info:
        apply(env, acts, kubeconfig, spec)
    assert info.value.type == "RanksMismatch" and info.value.non_retryable and "= 128 ranks" in str(info.value)
    assert DgdClient(new_api_client(kubeconfig)).get(dgd_name(workload_id, CLUSTER), "default") is None


def test_a_multi_node_kimi_k3_graph_becomes_ready_on_the_gb200_rack(sim, tmp_path, acts, env):
    from tests.dynamo.builders import kimi_k3_spec

    nvl = KubeconfigRef(source=str(sim.kubeconfig_path), context=sim.context("sim-nvl"))
    spec = kimi_k3_spec("gb200", "multi_node_tp_dp", cluster="sim-nvl", namespace="default",
                        hf_token_secret=None, model_cache_pvc=None)
    applied = apply(env, acts, nvl, spec)
    done = wait(env, acts, nvl, applied, weight_bytes=1_560_860_324_864)
    assert done.pods_total == 5  # a frontend and 4 trays of one TP4 x DP4 replica
    assert sum(sim.cluster("sim-nvl").gpus_in_use().values()) == 16
    assert delete(env, acts, nvl, applied.name).existed

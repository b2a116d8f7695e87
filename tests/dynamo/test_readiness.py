import pytest

from tests.dynamo.builders import KIMI_K3_WEIGHT_BYTES
from wingsmith.domain.dynamo.readiness import (
    READY_BASE_SECONDS,
    READY_MAX_SECONDS,
    evaluate_readiness,
    find_pod_failure,
    pods_ready,
    ready_deadline_seconds,
)


def dgd(generation, state=None, ready=None, observed=None, cond_generation="same"):
    status = {}
    if state:
        status["state"] = state
    if observed is not None:
        status["observedGeneration"] = observed
    if ready is not None:
        cond = {"type": "Ready", "status": ready, "reason": "R", "message": "m"}
        if cond_generation == "same":
            cond["observedGeneration"] = observed
        elif cond_generation is not None:
            cond["observedGeneration"] = cond_generation
        status["conditions"] = [{"type": "Other", "status": "True"}, cond]
    return {"metadata": {"generation": generation}, "status": status}


@pytest.mark.parametrize(("obj", "want", "ready"), [
    (dgd(2, "successful", "True", 2), 2, True),
    (dgd(2, "successful", "True", 2, cond_generation=None), 2, True),  # condition without its own generation
    (dgd(2, "successful", "True", 1), 2, False),   # stale: the previous spec was ready
    (dgd(2, "successful", "True", 2, cond_generation=1), 2, False),  # condition not yet for this spec
    (dgd(2, "pending", "True", 2), 2, False),
    (dgd(2, "successful", "False", 2), 2, False),
    (dgd(2, "successful", None, 2), 2, False),
    (dgd(1), 1, False),
    ({"metadata": {}}, 1, False),
])
def test_ready_needs_true_and_successful_for_the_applied_generation(obj, want, ready):
    assert evaluate_readiness(obj, want).ready is ready


def test_failed_counts_only_for_the_applied_generation():
    assert evaluate_readiness(dgd(3, "failed", "False", 3), 3).failed
    assert not evaluate_readiness(dgd(3, "failed", "False", 2), 3).failed


def pod(name, *, waiting=None, last=None, restarts=0, ready=False, init=False):
    cs = {"name": "main", "restartCount": restarts, "state": {}}
    if waiting:
        cs["state"]["waiting"] = {"reason": waiting, "message": f"{waiting} message"}
    if last:
        cs["lastState"] = {"terminated": {"reason": last, "exitCode": 137}}
    key = "initContainerStatuses" if init else "containerStatuses"
    return {"metadata": {"name": name}, "status": {key: [cs], "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


@pytest.mark.parametrize(("pods", "kind", "reason"), [
    ([pod("w-0", waiting="CrashLoopBackOff", last="Error", restarts=3)], "PodCrashLooping", "CrashLoopBackOff"),
    ([pod("w-0", waiting="ImagePullBackOff")], "ImagePullFailed", "ImagePullBackOff"),
    ([pod("w-0", waiting="ErrImagePull")], "ImagePullFailed", "ErrImagePull"),
    ([pod("w-0", waiting="CrashLoopBackOff", last="OOMKilled", restarts=2)], "OutOfMemory", "OOMKilled"),
    ([pod("w-0", waiting="CrashLoopBackOff", last="OOMKilled", restarts=1)], "OutOfMemory", "OOMKilled"),
    ([pod("w-0", last="OOMKilled", restarts=2)], "OutOfMemory", "OOMKilled"),
    ([pod("w-0", waiting="CreateContainerConfigError", init=True)], "ContainerConfigInvalid",
     "CreateContainerConfigError"),
    ([pod("f-0", ready=True), pod("w-1", waiting="CrashLoopBackOff")], "PodCrashLooping", "CrashLoopBackOff"),
])
def test_hopeless_pods_are_found_with_their_reason(pods, kind, reason):
    failure = find_pod_failure(pods)
    assert failure is not None and (failure.type, failure.reason) == (kind, reason)
    assert failure.pod in failure.describe() and reason in failure.describe()


@pytest.mark.parametrize("pods", [
    [],
    [pod("w-0", waiting="ContainerCreating")],
    [pod("w-0", last="OOMKilled", restarts=1)],  # one OOM kill may be a warm-up spike
    [pod("w-0", ready=True)],
])
def test_pods_that_may_still_come_up_are_not_failures(pods):
    assert find_pod_failure(pods) is None


def test_pods_ready_counts():
    assert pods_ready([pod("a", ready=True), pod("b"), pod("c", ready=True)]) == (2, 3)


def test_deadline_scales_with_model_size():
    small = ready_deadline_seconds(16_000_000_000)      # an 8B model in bf16
    kimi = ready_deadline_seconds(KIMI_K3_WEIGHT_BYTES)
    assert READY_BASE_SECONDS < small < kimi < READY_MAX_SECONDS
    assert 60 * 60 < kimi < 2 * 60 * 60  # 1.56 TB needs more than an hour at a cold-cache pace
    assert ready_deadline_seconds(10**15) == READY_MAX_SECONDS
    with pytest.raises(ValueError, match="negative"):
        ready_deadline_seconds(-1)

"""When a DynamoGraphDeployment serves, and when it never will: pure verdicts over API objects.

Ready means `status.conditions[Ready]` is True and `status.state` is `successful`, both observed
for the generation just applied, so a stale "successful" from the previous spec never counts.
The operator reports `failed` only for reconcile errors; crash-looping or unpullable workers leave
it `pending`, so those are read from the pods' container statuses instead.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

STATE_SUCCESSFUL = "successful"
STATE_FAILED = "failed"

# Waiting reasons that never resolve by themselves.
_HOPELESS_WAITING = {
    "CrashLoopBackOff": "PodCrashLooping",
    "ImagePullBackOff": "ImagePullFailed",
    "ErrImagePull": "ImagePullFailed",
    "InvalidImageName": "ImagePullFailed",
    "CreateContainerConfigError": "ContainerConfigInvalid",
}
OOM_RESTARTS = 2  # one OOM kill can be a warm-up spike; a repeat is the model not fitting
_MESSAGE_LIMIT = 300


class Readiness(BaseModel):
    ready: bool
    state: str | None = None
    generation: int | None = None
    observed_generation: int | None = None
    condition_status: str | None = None
    condition_reason: str | None = None
    condition_message: str | None = None

    @property
    def failed(self) -> bool:
        return self.state == STATE_FAILED and self.observed_generation == self.generation

    def describe(self) -> str:
        cond = self.condition_status or "absent"
        text = (f"state={self.state or 'unset'} Ready={cond} observedGeneration="
                f"{self.observed_generation} (want {self.generation})")
        if self.condition_reason:
            text += f" reason={self.condition_reason}"
        return text


def evaluate_readiness(obj: dict[str, Any], generation: int) -> Readiness:
    """Readiness of a DGD object (as the API returns it) for `generation`."""
    status = obj.get("status") or {}
    cond: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    observed = status.get("observedGeneration")
    cond_gen = cond.get("observedGeneration", observed)
    ready = (observed == generation and cond_gen == generation
             and cond.get("status") == "True" and status.get("state") == STATE_SUCCESSFUL)
    return Readiness(
        ready=ready, state=status.get("state"), generation=generation, observed_generation=observed,
        condition_status=cond.get("status"), condition_reason=cond.get("reason"),
        condition_message=_short(cond.get("message")))


class PodFailure(BaseModel):
    """A pod that will not come up without a change: the reason is what kubectl would show."""

    type: str  # an error type name for ApplicationError
    pod: str
    container: str
    reason: str
    restarts: int = 0
    message: str | None = None

    def describe(self) -> str:
        text = f"pod {self.pod} container {self.container}: {self.reason} (restarts {self.restarts})"
        return f"{text}: {self.message}" if self.message else text


def find_pod_failure(pods: list[dict[str, Any]]) -> PodFailure | None:
    """The first hopeless container among `pods` (API dicts), in a stable order."""
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("name", "")):
        name = (pod.get("metadata") or {}).get("name", "?")
        status = pod.get("status") or {}
        for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            failure = _container_failure(name, cs)
            if failure:
                return failure
    return None


def _container_failure(pod: str, cs: dict[str, Any]) -> PodFailure | None:
    restarts = int(cs.get("restartCount") or 0)
    waiting = (cs.get("state") or {}).get("waiting") or {}
    last = (cs.get("lastState") or {}).get("terminated") or {}
    current = (cs.get("state") or {}).get("terminated") or {}
    oom = "OOMKilled" in (last.get("reason"), current.get("reason"))
    reason = waiting.get("reason")
    base = {"pod": pod, "container": cs.get("name", "?"), "restarts": restarts}
    # Killed for memory again and again: either the kubelet already backs off (CrashLoopBackOff
    # says the crash repeated) or the restart count shows it.
    if oom and (restarts >= OOM_RESTARTS or reason == "CrashLoopBackOff"):
        return PodFailure(type="OutOfMemory", reason="OOMKilled", **base,
                          message=_short(last.get("message") or current.get("message")))
    if reason in _HOPELESS_WAITING:
        return PodFailure(type=_HOPELESS_WAITING[reason], reason=reason, **base,
                          message=_short(waiting.get("message") or last.get("message")))
    return None


def unschedulable_pods(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Pods the scheduler found no node for, with its reason as `kubectl describe` shows it. Passing
    for a moment when several deployments race for the last free GPUs; lasting when they lost."""
    found = {}
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" \
                    and cond.get("reason") == "Unschedulable":
                found[(pod.get("metadata") or {}).get("name", "?")] = _short(cond.get("message")) or "no node fits"
    return found


def pods_ready(pods: list[dict[str, Any]]) -> tuple[int, int]:
    """(ready, total) pods, for progress reports."""
    ready = sum(
        1 for p in pods
        if any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (p.get("status") or {}).get("conditions") or []))
    return ready, len(pods)


# Loading weights dominates start-up: pulling from the cache volume (or the Hub on a cold cache)
# and copying onto the GPUs. 250 MB/s is a cold-cache pace; the base covers image pull, scheduling,
# CUDA graph capture and warm-up.
READY_BASE_SECONDS = 15 * 60
READY_BYTES_PER_SECOND = 250e6
READY_MAX_SECONDS = 6 * 3600


def ready_deadline_seconds(weight_bytes: int | None) -> float:
    """How long a deployment of a model with `weight_bytes` of weights may take to become ready."""
    if weight_bytes is None:
        return READY_MAX_SECONDS / 2
    if weight_bytes < 0:
        raise ValueError(f"weight bytes cannot be negative, got {weight_bytes}")
    return min(READY_MAX_SECONDS, READY_BASE_SECONDS + weight_bytes / READY_BYTES_PER_SECOND)


def _short(text: str | None) -> str | None:
    if not text:
        return None
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"

"""Is what the plane applied on a cluster still there, as applied, and serving? A pure verdict.

The workload's watch loop observes each cluster (the DGD's metadata and status, now and then its
frontend) and asks `judge` what to do, carrying `unhealthy_since` from one look to the next:

- everything as applied, ready, and the frontend lists the served name: `ok` (serving);
- no DGD: `reapply` at once ("deployment missing");
- a spec the plane did not apply (the generation moved, or another spec hash): `reapply` under
  policy `heal` (the default), `report` and leave it under policy `report`;
- the cluster's API unreachable, the DGD being deleted, unready, or its frontend not answering:
  `wait` (degraded, with since-when) until the grace has passed, then `replace`: drain the cluster
  at every endpoint and place its replicas elsewhere.

Like a Kubernetes controller, the plane acts on what it sees, never on what it last did: a
deployment that is not there is not serving, whatever the registry said a minute ago.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from wingsmith.domain.dynamo.readiness import evaluate_readiness
from wingsmith.domain.dynamo.render import SPEC_HASH_ANNOTATION, spec_hash

DriftPolicy = Literal["heal", "report"]
Action = Literal["ok", "wait", "reapply", "report", "replace"]
Health = Literal["serving", "degraded", "drifted"]
# What was wrong, as a small fixed set (a metrics label, a filter in the events).
Problem = Literal["DeploymentMissing", "SpecEdited", "DeploymentDeleting", "ClusterUnreachable", "Unready",
                  "FrontendNotServing"]

DEFAULT_GRACE = timedelta(minutes=2)
DEPLOYMENT_MISSING = "deployment missing"


class Applied(BaseModel):
    """What the plane put on one cluster, as the workload remembers it."""

    cluster: str
    dgd_name: str
    namespace: str
    spec_hash: str = Field(description="the `wingsmith.dev/spec-hash` the plane rendered")
    generation: int | None = Field(default=None, description="what the last apply returned; None: not known")
    replicas: int = Field(ge=0)
    served_model_name: str


class FrontendCheck(BaseModel):
    url: str | None = None
    models: list[str] = Field(default_factory=list)
    error: str | None = Field(default=None, description="why it gave no list: HTTP status, connection error")


class Observation(BaseModel):
    """One look at one cluster's DGD (and, when probed, its frontend)."""

    cluster: str
    at: datetime
    reachable: bool = True
    error: str | None = Field(default=None, description="why the cluster's API could not be read")
    exists: bool = False
    deleting: bool = False
    uid: str | None = None
    generation: int | None = None
    observed_generation: int | None = None
    spec_hash: str | None = Field(default=None, description="the spec-hash annotation on the live object")
    live_spec_hash: str | None = Field(default=None, description="the hash of the live spec itself")
    ready: bool = False
    state: str | None = None
    ready_replicas: int | None = None
    condition: str | None = Field(default=None, description="the Ready condition's message when not ready")
    frontend: FrontendCheck | None = Field(default=None, description="None when not probed this time")
    changed_at: datetime | None = Field(default=None, description="when the cluster says the object last changed: "
                                        "its deletionTimestamp, else its newest managedFields time")

    def news_key(self) -> str:
        """What `judge` can tell apart, without the time and the wording of errors: a look that
        waits for news (activities/observe.py) answers when this changes, and stays quiet while it
        does not."""
        front = None if self.frontend is None else (self.frontend.error is None, sorted(self.frontend.models))
        facts = (self.reachable, self.exists, self.deleting, self.uid, self.generation, self.observed_generation,
                 self.spec_hash, self.live_spec_hash, self.ready, self.state, self.ready_replicas, front)
        return hashlib.sha256(repr(facts).encode()).hexdigest()[:16]


class Verdict(BaseModel):
    action: Action
    health: Health
    problem: Problem | None = None
    cause: str | None = None
    unhealthy_since: datetime | None = None

    @property
    def heals(self) -> bool:
        return self.action in ("reapply", "replace")


def edited(applied: Applied, seen: Observation) -> str | None:
    """Why the live spec is not the one the plane applied, or None."""
    if seen.spec_hash != applied.spec_hash:
        return f"spec-hash {seen.spec_hash or 'absent'} is not the applied {applied.spec_hash}"
    if applied.generation is not None and seen.generation != applied.generation:
        return f"generation {seen.generation}, applied {applied.generation}"
    if applied.generation is None and seen.live_spec_hash and seen.live_spec_hash != applied.spec_hash:
        return "the spec no longer hashes to the applied one"
    return None


def unready(applied: Applied, seen: Observation) -> tuple[Problem, str] | None:
    """Why the DGD is not serving what was applied, or None."""
    if seen.observed_generation != seen.generation:
        return "Unready", f"the operator has not caught up (observedGeneration {seen.observed_generation}, " \
                          f"generation {seen.generation})"
    if not seen.ready:
        return "Unready", f"unready: state {seen.state or 'unset'}" + (f", {seen.condition}" if seen.condition else "")
    if seen.ready_replicas is not None and seen.ready_replicas < applied.replicas:
        return "Unready", f"unready: {seen.ready_replicas}/{applied.replicas} replicas ready"
    front = seen.frontend
    if front is not None and applied.served_model_name not in front.models:
        answer = front.error or f"lists {front.models or 'no models'}"
        return "FrontendNotServing", f"frontend does not answer {applied.served_model_name!r} ({answer})"
    return None


def judge(applied: Applied, seen: Observation, *, unhealthy_since: datetime | None = None,
          policy: DriftPolicy = "heal", grace: timedelta = DEFAULT_GRACE) -> Verdict:
    """What to do about one cluster now. `unhealthy_since` is the previous verdict's, so a problem
    that lasts is replaced after `grace`, and one that clears starts the clock afresh next time."""

    def lasting(problem: Problem, cause: str) -> Verdict:
        since = unhealthy_since or seen.at
        if seen.at - since >= grace:
            return Verdict(action="replace", health="degraded", problem=problem, unhealthy_since=since,
                           cause=f"{cause}; for {_span(seen.at - since)}, longer than the {_span(grace)} grace")
        return Verdict(action="wait", health="degraded", problem=problem, unhealthy_since=since,
                       cause=f"{cause} (since {since.isoformat(timespec='seconds')})")

    if not seen.reachable:
        return lasting("ClusterUnreachable", f"cluster unreachable: {seen.error or 'no answer'}")
    if not seen.exists:
        return Verdict(action="reapply", health="degraded", problem="DeploymentMissing", cause=DEPLOYMENT_MISSING,
                       unhealthy_since=unhealthy_since or seen.at)
    if seen.deleting:
        return lasting("DeploymentDeleting", "deployment being deleted outside the plane")
    drift = edited(applied, seen)
    if drift and policy == "heal":
        return Verdict(action="reapply", health="degraded", problem="SpecEdited",
                       cause=f"spec edited outside the plane: {drift}", unhealthy_since=unhealthy_since or seen.at)
    wrong = unready(applied, seen)
    if wrong:
        problem, cause = wrong
        return lasting(problem, f"{cause} (spec edited outside the plane: {drift})" if drift else cause)
    if drift:
        return Verdict(action="report", health="drifted", problem="SpecEdited",
                       cause=f"spec edited outside the plane: {drift}")
    return Verdict(action="ok", health="serving")


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def read_observation(cluster: str, at: datetime, obj: dict[str, Any] | None,
                     frontend: FrontendCheck | None = None) -> Observation:
    """An Observation of a DGD as the API returned it (None: it does not exist)."""
    if obj is None:
        return Observation(cluster=cluster, at=at, exists=False)
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    generation = int(meta["generation"]) if meta.get("generation") is not None else None
    verdict = evaluate_readiness(obj, generation or 0)
    return Observation(
        cluster=cluster, at=at, exists=True, deleting=bool(meta.get("deletionTimestamp")), uid=meta.get("uid"),
        generation=generation, observed_generation=verdict.observed_generation,
        spec_hash=(meta.get("annotations") or {}).get(SPEC_HASH_ANNOTATION),
        live_spec_hash=spec_hash(obj.get("spec") or {}), ready=verdict.ready, state=verdict.state,
        ready_replicas=_serving_replicas(obj.get("spec") or {}, status),
        condition=None if verdict.ready else verdict.condition_message, frontend=frontend,
        changed_at=_changed_at(meta))


def _changed_at(meta: dict[str, Any]) -> datetime | None:
    """The fault's own time, as the cluster recorded it (a heal counts from it, not from when it was seen)."""
    # Status writes (the operator's) are no change of what was asked: only spec writers count.
    stamps = [meta.get("deletionTimestamp")] if meta.get("deletionTimestamp") else [
        m.get("time") for m in meta.get("managedFields") or []
        if m.get("time") and m.get("subresource") != "status" and "f:spec" in (m.get("fieldsV1") or {})]
    times = []
    for stamp in stamps:
        try:
            at = stamp if isinstance(stamp, datetime) else datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            continue
        times.append(at if at.tzinfo else at.replace(tzinfo=UTC))
    return max(times, default=None)


def _serving_replicas(spec: dict[str, Any], status: dict[str, Any]) -> int | None:
    """Ready replicas of the component that carries the workload's replica count (the worker, or
    the decode worker of a disaggregated graph), from the status the operator writes."""
    counted = [c.get("name") for c in spec.get("components") or [] if c.get("type") in ("worker", "decode")]
    per_component = status.get("components") or status.get("services") or {}
    ready = [int((per_component.get(name) or {}).get("readyReplicas") or 0) for name in counted if name]
    return min(ready) if ready and per_component else None

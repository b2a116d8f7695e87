"""The drift verdict, as a table: what was applied, what was seen, what the plane does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wingsmith.domain.reconcile import DEPLOYMENT_MISSING, Applied, FrontendCheck, Observation, Verdict, judge

T0 = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)
HASH, OTHER = "sha256:" + "a" * 32, "sha256:" + "b" * 32
APPLIED = Applied(cluster="sim-east", dgd_name="kimi-sim-east", namespace="default", spec_hash=HASH, generation=2,
                  replicas=2, served_model_name="kimi-k3")
SERVING: dict[str, Any] = dict(cluster="sim-east", at=T0, exists=True, uid="u1", generation=2, observed_generation=2,
                               spec_hash=HASH, live_spec_hash=HASH, ready=True, state="successful", ready_replicas=2)
ANSWERS = FrontendCheck(url="http://f", models=["kimi-k3"])


def seen(**changes: Any) -> Observation:
    return Observation(**{**SERVING, **changes})


MIN = timedelta(minutes=1)
CASES: list[tuple[str, Observation, dict[str, Any], str, str, str | None]] = [
    # name, observation, judge kwargs, action, health, words the cause must contain
    ("as applied and ready", seen(), {}, "ok", "serving", None),
    ("as applied, frontend answers", seen(frontend=ANSWERS), {}, "ok", "serving", None),
    ("missing", seen(exists=False, generation=None, spec_hash=None), {}, "reapply", "degraded", DEPLOYMENT_MISSING),
    ("missing, policy report", seen(exists=False), {"policy": "report"}, "reapply", "degraded", DEPLOYMENT_MISSING),
    ("spec edited (generation moved)", seen(generation=3, observed_generation=3), {}, "reapply", "degraded",
     "generation 3, applied 2"),
    ("spec replaced by another renderer", seen(spec_hash=OTHER), {}, "reapply", "degraded", "spec-hash"),
    ("spec edited, policy report", seen(generation=3, observed_generation=3), {"policy": "report"}, "report",
     "drifted", "edited outside the plane"),
    ("spec edited, report, unready", seen(generation=3, observed_generation=3, ready=False, state="pending"),
     {"policy": "report"}, "wait", "degraded", "edited outside the plane"),
    ("generation unknown, live spec differs", seen(live_spec_hash=OTHER), {}, "ok", "serving", None),
    ("operator behind", seen(observed_generation=1), {}, "wait", "degraded", "observedGeneration 1"),
    ("unready", seen(ready=False, state="pending", condition="waiting for components: Worker: 0/1 ready"), {},
     "wait", "degraded", "Worker: 0/1"),
    ("fewer replicas ready", seen(ready_replicas=1), {}, "wait", "degraded", "1/2 replicas"),
    ("frontend lists another model", seen(frontend=FrontendCheck(url="http://f", models=["other"])), {}, "wait",
     "degraded", "does not answer 'kimi-k3'"),
    ("frontend down", seen(frontend=FrontendCheck(url="http://f", error="HTTP 404")), {}, "wait", "degraded",
     "HTTP 404"),
    ("unreachable", seen(reachable=False, error="Unreachable: connection refused", exists=False), {}, "wait",
     "degraded", "cluster unreachable: Unreachable: connection refused"),
    ("unreachable within the grace", seen(reachable=False), {"unhealthy_since": T0 - MIN}, "wait", "degraded",
     "since 2026-12-01T02:59:00"),
    ("unreachable past the grace", seen(reachable=False), {"unhealthy_since": T0 - 2 * MIN}, "replace", "degraded",
     "for 2 min 0 s, longer than the 2 min 0 s grace"),
    ("unready past a short grace", seen(ready=False), {"unhealthy_since": T0 - timedelta(seconds=30),
                                                       "grace": timedelta(seconds=20)}, "replace", "degraded",
     "30 s"),
    ("being deleted out of band", seen(deleting=True), {}, "wait", "degraded", "being deleted"),
    ("stuck deleting past the grace", seen(deleting=True), {"unhealthy_since": T0 - 3 * MIN}, "replace",
     "degraded", "being deleted"),
]


@pytest.mark.parametrize(("name", "observed", "kwargs", "action", "health", "cause"), CASES,
                         ids=[c[0] for c in CASES])
def test_verdicts(name: str, observed: Observation, kwargs: dict[str, Any], action: str, health: str,
                  cause: str | None) -> None:
    verdict = judge(APPLIED, observed, **kwargs)
    assert (verdict.action, verdict.health) == (action, health)
    if cause is None:
        assert verdict.cause is None and verdict.unhealthy_since is None and verdict.problem is None
    else:
        assert verdict.cause and cause in verdict.cause and verdict.problem is not None


@pytest.mark.parametrize(("observed", "problem"), [
    (seen(reachable=False), "ClusterUnreachable"), (seen(exists=False), "DeploymentMissing"),
    (seen(deleting=True), "DeploymentDeleting"), (seen(generation=3, observed_generation=3), "SpecEdited"),
    (seen(ready=False), "Unready"), (seen(frontend=FrontendCheck(error="HTTP 503")), "FrontendNotServing")])
def test_every_problem_is_named_from_a_small_set(observed: Observation, problem: str) -> None:
    assert judge(APPLIED, observed).problem == problem


def test_the_clock_starts_at_the_first_bad_look_and_resets_when_healthy() -> None:
    first = judge(APPLIED, seen(ready=False, at=T0))
    assert first.unhealthy_since == T0 and first.action == "wait"
    later = judge(APPLIED, seen(ready=False, at=T0 + 90 * timedelta(seconds=1)), unhealthy_since=first.unhealthy_since)
    assert later.unhealthy_since == T0 and later.action == "wait"
    gone = judge(APPLIED, seen(ready=False, at=T0 + 2 * MIN), unhealthy_since=later.unhealthy_since)
    assert gone.action == "replace" and gone.heals
    healthy = judge(APPLIED, seen(at=T0 + 3 * MIN), unhealthy_since=T0)
    assert healthy == Verdict(action="ok", health="serving")


def test_a_heal_keeps_the_time_the_problem_was_first_seen() -> None:
    """The heal's duration runs from the first bad look, however many looks it took."""
    verdict = judge(APPLIED, seen(exists=False, at=T0 + MIN), unhealthy_since=T0)
    assert verdict.action == "reapply" and verdict.unhealthy_since == T0


def test_an_unknown_generation_falls_back_to_the_live_spec() -> None:
    unknown = APPLIED.model_copy(update={"generation": None})
    assert judge(unknown, seen(live_spec_hash=OTHER)).action == "reapply"
    assert judge(unknown, seen()).action == "ok"

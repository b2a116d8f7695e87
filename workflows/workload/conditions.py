"""A workload's conditions, derived from its stage, its clusters and its upgrade (pure: the caller passes
the workflow's time). `contracts.conditions.set_condition` keeps each one's transition time."""

from __future__ import annotations

from datetime import datetime

from contracts import conditions as c
from contracts.upgrade import UpgradeClusterProgress
from contracts.workload import WorkloadState

_PROGRESSING = {"planning": c.PLANNING, "placing": c.PLACING, "rolling_out": c.ROLLING_OUT, "scaling": c.SCALING,
                "deleting": c.DELETING}
_UPGRADE_ENDED = {"succeeded": c.UPGRADE_SUCCEEDED, "rolled_back": c.UPGRADE_ROLLED_BACK,
                  "aborted": c.UPGRADE_ABORTED, "failed": c.UPGRADE_FAILED}


def show_conditions(state: WorkloadState, *, target: int, serving: int, standing_in: int, now: datetime) -> None:
    stage, put = state.stage, state.conditions

    if serving > 0:
        c.set_condition(put, c.AVAILABLE, "True", c.REPLICAS_SERVING, f"{serving} of {target} replica(s) serve", now)
    else:
        reason = {"failed": c.FAILED, "deleted": c.DELETED}.get(stage, c.NO_REPLICA_SERVING)
        c.set_condition(put, c.AVAILABLE, "False", reason, state.failure or f"no replica serves (the workload is "
                        f"{stage.replace('_', ' ')})", now)

    if stage in _PROGRESSING:
        c.set_condition(put, c.PROGRESSING, "True", _PROGRESSING[stage], stage.replace("_", " "), now)
    else:
        reason = {"failed": c.FAILED, "deleted": c.DELETED}.get(stage, c.SETTLED)
        c.set_condition(put, c.PROGRESSING, "False", reason, state.failure or f"{stage}: nothing is being changed",
                        now)

    problems = {n: s.error or "degraded" for n, s in sorted(state.clusters.items()) if s.state == "degraded"}
    missing = target - serving - standing_in
    if stage == "failed":
        c.set_condition(put, c.DEGRADED, "True", c.FAILED, state.failure or "failed", now)
    elif stage == "degraded" and problems:
        c.set_condition(put, c.DEGRADED, "True", c.CLUSTER_DEGRADED,
                        "; ".join(f"{n}: {why}" for n, why in problems.items()), now)
    elif stage == "degraded":
        c.set_condition(put, c.DEGRADED, "True", c.REPLICAS_MISSING,
                        f"{max(missing, 0)} of {target} replica(s) could not be placed", now)
    else:
        c.set_condition(put, c.DEGRADED, "False", c.AS_PLANNED, "what is observed is what was asked", now)

    upgrade = state.upgrade
    if upgrade is None:
        c.set_condition(put, c.UPGRADE_IN_PROGRESS, "False", c.NO_UPGRADE, "no upgrade has run", now)
    elif upgrade.running:
        paused = upgrade.state == "paused"
        c.set_condition(put, c.UPGRADE_IN_PROGRESS, "True", c.UPGRADE_PAUSED if paused else c.UPGRADE_RUNNING,
                        upgrade.paused_reason if paused and upgrade.paused_reason else
                        "; ".join([f"{upgrade.from_artifact_id} → {upgrade.to_artifact_id}",
                                   *(_collecting(p) for p in upgrade.clusters if p.decides_by)]), now)
    else:
        c.set_condition(put, c.UPGRADE_IN_PROGRESS, "False", _UPGRADE_ENDED.get(upgrade.state, c.UPGRADE_FAILED),
                        "; ".join(upgrade.failures) or f"{upgrade.from_artifact_id} → {upgrade.to_artifact_id}", now)



def _collecting(p: UpgradeClusterProgress) -> str:
    """How long a step waits for traffic before it decides: light traffic adds up, it does not pause."""
    so_far = (p.verdict.figures.get("new_requests") if p.verdict else None) or 0
    return (f"{p.cluster} at {p.new_weight_percent} %: {so_far} request(s) to the new version so far, deciding by "
            f"{p.decides_by:%H:%M:%S} UTC at the latest")

"""Team quotas: an admin sets, shows and removes a team's quota; a team (or an admin) reads it with what its
workloads hold against it; and the workload use cases claim room under it before they create, scale or upgrade
(wingsmith/domain/quotas.py judges, wingsmith/adapters/store/quotas.py reads and holds).

A request past the quota is refused with 403 `quota_exceeded`, as Kubernetes refuses a pod past a
ResourceQuota: the caller is not allowed that much, and asking again does not help until the quota or the use
changes. The numbers are in the error's details. A claim is judged and held in one transaction under the team's
advisory lock, so two requests at once cannot both take the last GPUs.
"""

from __future__ import annotations

import asyncpg
from pydantic import ValidationError

from api.auth import Principal
from api.errors import ApiError
from api.ownership import may_see, sees_all
from api.responses import TeamQuota
from contracts.upgrade import UpgradeRequest
from wingsmith.adapters import quota_claims as claims
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.quota_claims import NOTHING_HELD, Claim, QuotaRefused
from wingsmith.adapters.recipes.files import catalog_of_draft
from wingsmith.adapters.store import quotas as store
from wingsmith.adapters.store.quotas import Shape
from wingsmith.domain.config import Settings
from wingsmith.domain.quotas import (
    PricedCluster,
    Quota,
    Verdict,
    ask_of,
    card_price,
    judge,
    line_words,
    lines_of,
    use_of,
)
from wingsmith.domain.workloads import ApprovedArtifact, InvalidWorkload, WorkloadRequest, plan_workload

log = get_logger("wingsmith.api.quotas")


async def set_quota(team: str, quota: Quota, *, principal: Principal, db: asyncpg.Pool) -> TeamQuota:
    """Set (or replace) a team's quota. Use already past it stays (nothing is stopped), but nothing more is
    allowed until it is back within."""
    await store.put_quota(db, team, quota, principal.name)
    log.info("team quota set", quota_team=team, quota=quota.model_dump(mode="json"))
    return await team_quota(team, db=db)


async def show(team: str, *, principal: Principal, db: asyncpg.Pool) -> TeamQuota:
    """Its own team's quota to a member, any team's to an admin; another team's answers 404, as another team's
    workload does."""
    if not may_see(principal, team):
        raise ApiError(404, f"no quota of team {team} that you may see (a team sees its own; an admin, every "
                            "team's)")
    return await team_quota(team, db=db)


async def remove(team: str, *, principal: Principal, db: asyncpg.Pool) -> None:
    """Remove a team's quota: from then on the team is not limited."""
    if not await store.delete_quota(db, team):
        raise ApiError(404, f"team {team} has no quota", code="no_quota")
    log.info("team quota removed", quota_team=team, by=principal.name)


async def fleet(principal: Principal, *, db: asyncpg.Pool) -> list[TeamQuota]:
    """Every team with a quota or a live workload (an admin's view), or the principal's own team."""
    teams = await store.teams_in_use(db) if sees_all(principal) else [principal.team]
    clusters = await store.priced_clusters(db)
    return [await team_quota(team, db=db, clusters=clusters) for team in teams]


async def team_quota(team: str, *, db: asyncpg.Pool, clusters: list[PricedCluster] | None = None) -> TeamQuota:
    """The team's quota and what its workloads hold against it (`clusters`: their prices, read when not given)."""
    record = await store.get_quota(db, team)
    use = use_of(await store.holdings(db, team, clusters if clusters is not None else await store.priced_clusters(db)))
    if record is None:
        return TeamQuota(team=team, quota=None, set_by=None, updated_at=None, use=use, lines=[],
                         words=f"team {team} has no quota: nothing is limited")
    lines = lines_of(record.quota, use, use, [*record.quota.gpus, *use.gpus])
    over = [f"{line.limit}: {line.used:g} used > {line.quota:g} {line.unit}" for line in lines
            if line.used > line.quota]
    words = (f"team {team} is past its quota, so nothing more is allowed until it is back within: {'; '.join(over)}"
             if over else f"team {team} is within its quota")
    return TeamQuota(team=team, quota=record.quota, set_by=record.set_by, updated_at=record.updated_at, use=use,
                     lines=lines, words=words)


# ---- claims: the workload use cases ask before they act ----------------------------------------------------

async def verdict(team: str, workload_id: str, card: str, gpus: int, *, db: asyncpg.Pool) -> Verdict:
    """Whether `workload_id` holding `gpus` GPUs of `card` fits `team`'s quota, writing nothing (a dry run)."""
    record = await store.get_quota(db, team)
    if record is None:
        return judge(team, None, [], ask_of(workload_id, card, gpus, None))
    clusters = await store.priced_clusters(db)
    held = await store.holdings(db, team, clusters)
    current = next((h for h in held if h.workload_id == workload_id), None)
    return judge(team, record.quota, held, ask_of(workload_id, card, gpus, card_price(card, clusters), current))


async def claim(team: str, workload_id: str, card: str, gpus_per_replica: int, replicas: int, *,
                db: asyncpg.Pool) -> Claim:
    """Take room for `workload_id` to hold `replicas` × `gpus_per_replica` GPUs of `card` in `team`'s quota, or
    raise 403 `quota_exceeded` with the numbers. A team without a quota is not limited and nothing is held."""
    try:
        return await claims.claim(team, workload_id, card, gpus_per_replica, replicas, db=db)
    except QuotaRefused as refused:
        raise quota_exceeded(refused.verdict) from None


async def claim_scale(workload_id: str, replicas: int, *, db: asyncpg.Pool) -> Claim:
    """Room for a workload scaled to `replicas`, in its owner team's quota (an admin's scale counts there too)."""
    try:
        return await claims.claim_scale(workload_id, replicas, db=db)
    except QuotaRefused as refused:
        raise quota_exceeded(refused.verdict) from None


async def claim_upgrade(workload_id: str, body: UpgradeRequest, artifact: ApprovedArtifact, *, db: asyncpg.Pool,
                        settings: Settings) -> Claim:
    """Room for the GPUs an upgrade to another layout adds per replica; an upgrade that adds none takes none.
    (While an upgrade runs, its new version serves beside the old for a while: that overlap is not counted.)"""
    shape = await store.shape_of(db, workload_id)
    if shape is None or not shape.card:
        return NOTHING_HELD
    per_replica = upgraded_gpus_per_replica(shape, body, artifact, settings)
    if per_replica is None or per_replica <= shape.gpus_per_replica:
        return NOTHING_HELD
    return await claim(shape.team, workload_id, shape.card, per_replica, shape.replicas, db=db)


release = claims.release


def quota_exceeded(answer: Verdict) -> ApiError:
    """403 `quota_exceeded`: the verdict in words, and each line's numbers in the details."""
    return ApiError(403, answer.words[:1].upper() + answer.words[1:] + ". Ask an admin for more, or free some "
                    "(scale down or delete a workload)", code="quota_exceeded",
                    details={"team": answer.team, "policy": answer.policy,
                             "past": [line.limit for line in answer.lines if not line.fits],
                             "lines": [line.model_dump(mode="json") for line in answer.lines],
                             "words": [line_words(line) for line in answer.lines]})


def upgraded_gpus_per_replica(shape: Shape, body: UpgradeRequest, artifact: ApprovedArtifact,
                              settings: Settings) -> int | None:
    """GPUs per replica of a workload upgraded to another layout, planned as the workflow will plan it from the
    workload's recorded shape; None when the upgrade keeps them (no new layout, a workload sized by a traffic
    target keeps its configuration) or cannot be planned (the workflow then refuses it in its own words)."""
    if body.layout is None or body.layout == shape.layout or shape.sized:
        return None
    try:
        asked = WorkloadRequest(artifact_id=artifact.id, hardware=shape.card, layout=body.layout,
                                replicas=max(shape.replicas, 1), variant=body.variant or shape.variant or "default",
                                features=(shape.features or []) if body.features is None else body.features)
        catalog = catalog_of_draft(artifact.catalog_version, settings.catalogs_dir)
        planned = plan_workload(asked, artifact, catalog, image=settings.vllm_runtime_image,
                                namespace=settings.deploy_namespace, hf_token_secret=settings.hf_token_secret)
    except (InvalidWorkload, ValidationError):
        return None
    return planned.gpus_per_replica

"""Claims on a team's quota: room taken for a create, a scale or an upgrade before it is asked of the workload's
workflow, judged and held in one transaction under the team's advisory lock (so two requests at once cannot both
take the last GPUs), and given back when the request did not take effect. Shared by the API's use cases
(api/services/quotas.py, which answers a refusal with 403 `quota_exceeded`) and the autoscaler's scale activity
(which records "held: quota")."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.store import quotas as store
from wingsmith.domain.quotas import BUDGET, Allowed, Verdict, ask_of, card_price, judge

log = get_logger("wingsmith.quotas")


@dataclass(frozen=True)
class Claim:
    """Room a request took under its team's quota; `release` gives it back when the request did not happen."""
    workload_id: str
    team: str
    before: Allowed | None
    held: bool


NOTHING_HELD = Claim(workload_id="", team="", before=None, held=False)


class QuotaRefused(Exception):
    """Past the team's quota: the verdict has the numbers."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.words)
        self.verdict = verdict

    @property
    def only_budget(self) -> bool:
        """Only the budget (cost per hour) is past: an approver may let it go past; GPUs never."""
        return all(line.limit == BUDGET for line in self.verdict.lines if not line.fits)


async def claim(team: str, workload_id: str, card: str, gpus_per_replica: int, replicas: int, *,
                db: asyncpg.Pool, past_budget: bool = False) -> Claim:
    """Take room for `workload_id` to hold `replicas` × `gpus_per_replica` GPUs of `card` in `team`'s quota, or
    raise QuotaRefused. `past_budget`: an approver let it go past the budget (not past a GPU limit). A team
    without a quota is not limited and nothing is held."""
    if await store.get_quota(db, team) is None:
        return NOTHING_HELD
    clusters = await store.priced_clusters(db)
    async with store.locked(db, team) as conn:
        record = await store.get_quota(conn, team)  # again, under the lock: it may have changed
        if record is None:
            return NOTHING_HELD
        held = await store.holdings(conn, team, clusters)
        current = next((h for h in held if h.workload_id == workload_id), None)
        ask = ask_of(workload_id, card, gpus_per_replica * replicas, card_price(card, clusters), current)
        answer = judge(team, record.quota, held, ask)
        if not answer.fits:
            refused = QuotaRefused(answer)
            if not (past_budget and refused.only_budget):
                log.info("refused: past the team's quota", quota_team=team, workload=workload_id, words=answer.words)
                raise refused
            log.info("past the team's budget, as approved", quota_team=team, workload=workload_id)
        before = await store.hold(conn, workload_id=workload_id, team=team, card=card,
                                  gpus_per_replica=gpus_per_replica, replicas=replicas)
    return Claim(workload_id=workload_id, team=team, before=before, held=True)


async def claim_scale(workload_id: str, replicas: int, *, db: asyncpg.Pool, past_budget: bool = False) -> Claim:
    """Room for a workload scaled to `replicas`, in its owner team's quota (an admin's scale counts there too)."""
    shape = await store.shape_of(db, workload_id)
    if shape is None or not shape.card:
        return NOTHING_HELD  # not recorded yet nor held: the workflow answers (404 when it does not run)
    return await claim(shape.team, workload_id, shape.card, shape.gpus_per_replica, replicas, db=db,
                       past_budget=past_budget)


async def release(taken: Claim, *, db: asyncpg.Pool) -> None:
    """Give back what a claim held: the request it was for did not take effect."""
    if taken.held:
        await store.restore(db, workload_id=taken.workload_id, team=taken.team, before=taken.before)

"""A claim on a team's quota is judged and held in one transaction under the team's advisory lock, on the real
Postgres: a second claim that arrives while the first is being judged waits for it, then sees what it was
allowed (two creates at once cannot both take the last GPUs); a claim whose request then fails gives its room
back, and a hold counts only while it is fresh."""

from __future__ import annotations

import asyncio

import pytest

from api.errors import ApiError
from api.services import quotas
from wingsmith.adapters.store import quotas as store
from wingsmith.domain.quotas import Quota


async def test_a_claim_arriving_mid_judgement_waits_and_sees_the_first(pg_pool, monkeypatch):
    await store.put_quota(pg_pool, "blue", Quota(gpus={"h200": 16}), "test")
    real = store.holdings
    first_read, go_on = asyncio.Event(), asyncio.Event()

    async def slow_first(db, team, clusters):
        held = await real(db, team, clusters)
        if not first_read.is_set():  # the first claim has read the use and not yet written its hold
            first_read.set()
            await go_on.wait()
        return held

    monkeypatch.setattr(store, "holdings", slow_first)
    first = asyncio.create_task(quotas.claim("blue", "wl-a", "h200", 16, 1, db=pg_pool))
    await first_read.wait()
    second = asyncio.create_task(quotas.claim("blue", "wl-b", "h200", 16, 1, db=pg_pool))
    try:
        await asyncio.sleep(0.5)
        judged_early = second.done()
    finally:
        go_on.set()  # never leave the first claim (and its transaction) waiting
    assert (await first).held
    with pytest.raises(ApiError) as refused:
        await second
    assert not judged_early, "the second claim judged while the first had not written its hold"
    assert refused.value.status == 403 and refused.value.code == "quota_exceeded"
    assert refused.value.details["words"] == ["h200: 16 used + 16 asked > 16 GPUs"]
    assert await pg_pool.fetchval("select array_agg(workload_id) from quota_holds where team = 'blue'") == ["wl-a"]


async def test_a_claim_gives_back_its_room_and_a_stale_hold_counts_no_more(pg_pool):
    await store.put_quota(pg_pool, "green", Quota(gpus={"*": 32}), "test")
    taken = await quotas.claim("green", "wl-g", "b200", 8, 2, db=pg_pool)
    scaled = await quotas.claim("green", "wl-g", "b200", 8, 4, db=pg_pool)  # the same workload, scaled up
    assert (await quotas.team_quota("green", db=pg_pool)).use.gpus == {"b200": 32}
    await quotas.release(scaled, db=pg_pool)  # its workflow refused the scale: back to what it held before
    assert (await quotas.team_quota("green", db=pg_pool)).use.gpus == {"b200": 16}
    await quotas.release(taken, db=pg_pool)  # the workflow did not start: nothing held
    assert (await quotas.team_quota("green", db=pg_pool)).use.total_gpus == 0

    await quotas.claim("green", "wl-old", "b200", 8, 4, db=pg_pool)
    await pg_pool.execute(f"update quota_holds set held_at = now() - interval '{store.HOLD_HOURS} hours 1 minute'")
    assert (await quotas.team_quota("green", db=pg_pool)).use.total_gpus == 0
    await quotas.claim("green", "wl-new", "b200", 8, 4, db=pg_pool)  # room again; the stale hold is removed
    assert await pg_pool.fetchval("select array_agg(workload_id) from quota_holds where team = 'green'") == ["wl-new"]


async def test_a_team_without_a_quota_holds_nothing(pg_pool):
    taken = await quotas.claim("plain", "wl-p", "h200", 8, 1000, db=pg_pool)
    assert not taken.held
    assert await pg_pool.fetchval("select count(*) from quota_holds where team = 'plain'") == 0

"""Public model pages share one live inventory read per LIVE_READ_TTL_SECONDS: a burst of page views
starts one LiveInventoryWorkflow on the worker, not one each."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from api.responses import DryRunResponse
from console import suggest
from wingsmith.domain.placement import ClusterInventory, PlacementDecision


def _request() -> Any:
    return SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace()))


@pytest.fixture
def live_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    reads: list[bool] = []

    async def fake_dry_run(body: Any, **_services: Any) -> DryRunResponse:
        if body.live and not body.inventories:
            reads.append(True)
            await asyncio.sleep(0.01)  # a read takes time: concurrent views must wait for it, not repeat it
        inventories = body.inventories or [ClusterInventory(cluster="sim-east", error="unreadable in this test")]
        decision = PlacementDecision(plan=body.plan, replicas={}, placed=0, unplaced=1, summary="nothing placed",
                                     clusters=[])
        return DryRunResponse(decision=decision,
                              inventories=inventories)

    monkeypatch.setattr(suggest, "dry_run", fake_dry_run)
    return reads


def _candidate() -> suggest.Candidate:
    return suggest.Candidate(hardware="h200", layout="single_node_tp", gpus=8, nodes=1)


async def test_page_views_share_one_live_read(live_reads: list[bool]) -> None:
    request = _request()
    trials = [suggest.placement_trial(None, request, None) for _ in range(5)]  # type: ignore[arg-type]
    await asyncio.gather(*(trial(_candidate()) for trial in trials))
    assert live_reads == [True]


async def test_live_read_is_repeated_after_the_ttl(live_reads: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    await suggest.placement_trial(None, request, None)(_candidate())  # type: ignore[arg-type]
    monkeypatch.setattr(suggest, "LIVE_READ_TTL_SECONDS", 0.0)
    await suggest.placement_trial(None, request, None)(_candidate())  # type: ignore[arg-type]
    assert live_reads == [True, True]

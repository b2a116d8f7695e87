"""A traffic target on one card: the plan's configuration, replicas and GPUs are those AIConfigurator's own
`recommend` command finds for the same inputs in the same run, and its predicted latencies are within
the target."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from tests.perf.conftest import CARD, ISL, MODEL, OSL, best_rows, cli_recommend, stopped_at_the_end
from wingsmith.adapters.perf.aiconfigurator import Estimator
from wingsmith.domain.perf.cards import system_for
from wingsmith.domain.perf.traffic import TrafficTarget

# The example target.
TARGET = TrafficTarget(requests_per_second=20, isl=ISL, osl=OSL, ttft_ms=1000, tpot_ms=40)


@pytest.mark.slow
async def test_a_target_is_planned_as_aiconfigurator_recommends(tmp_path: Path) -> None:
    system = system_for(CARD)
    assert system is not None
    with stopped_at_the_end(cli_recommend(tmp_path / "cli", model=MODEL, system=system,
                                          rate=TARGET.requests_per_second, isl=TARGET.isl, osl=TARGET.osl,
                                          ttft=TARGET.ttft_ms, tpot=TARGET.tpot_ms)) as cli:
        plan = await asyncio.to_thread(Estimator(tmp_path / "home").plan_for_target, model=MODEL, card=CARD,
                                       target=TARGET)
        printed, _ = await asyncio.to_thread(cli.communicate, timeout=1800)
    assert cli.returncode == 0, printed[-3000:]
    rows = best_rows(tmp_path / "cli")
    assert rows, printed[-3000:]
    # The CLI's pick: the fewest GPUs among its modes' best rows that meet both latency targets.
    meeting = {mode: row for mode, row in rows.items()
               if float(row["ttft"]) <= TARGET.ttft_ms and float(row["tpot"]) <= TARGET.tpot_ms}
    mode, row = min(meeting.items(), key=lambda item: (int(float(item[1]["total_gpus_needed"])),
                                                       float(item[1]["ttft"])))
    assert plan.meets_target and plan.why_not is None
    conf = plan.configuration
    assert conf is not None and conf.mode == mode
    assert plan.replicas == int(float(row["replicas_needed"]))
    assert plan.gpus == int(float(row["total_gpus_needed"]))
    assert conf.gpus_per_replica == int(float(row["num_total_gpus"]))
    assert conf.ttft_ms == pytest.approx(float(row["ttft"]), abs=1.5e-3)
    assert conf.tpot_ms == pytest.approx(float(row["tpot"]), abs=1.5e-3)
    assert conf.ttft_ms <= TARGET.ttft_ms and conf.tpot_ms <= TARGET.tpot_ms
    assert plan.replicas * conf.requests_per_second_per_replica >= TARGET.requests_per_second

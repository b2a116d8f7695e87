"""bench/autoscale.py's arithmetic, without a plane (the run itself takes minutes: docs/autoscaling.md#measured):
its oracle is the sim's own load model's (the fewest replicas holding the target; the floor at saturation), the
ramp goes 1× → 10× → 1×, GPU-hours integrate held readings, and a flap is a reversal within the cooldown."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from autoscale import (  # noqa: E402
    OUTPUT_TOKENS,
    PROFILE,
    PROMPT_TOKENS,
    TTFT_TARGET_MS,
    Oracle,
    Ramp,
    flaps,
    gpu_hours,
    saturated_capacity,
    saturated_replicas,
)

from sim.kube.load_model import LoadProfile, input_tokens, prefill_ms, step_ms  # noqa: E402


def test_the_oracle_capacity_is_the_load_models():
    profile = LoadProfile.model_validate(PROFILE)
    slots = PROFILE["max_num_seqs"]
    assert input_tokens(PROMPT_TOKENS * 4) == PROMPT_TOKENS  # the bench's prompt is as long as it says
    busy_ms = prefill_ms(profile, PROMPT_TOKENS, slots, slots) + OUTPUT_TOKENS * step_ms(profile, slots, slots)
    assert saturated_capacity(PROFILE, PROMPT_TOKENS, OUTPUT_TOKENS) == pytest.approx(slots / (busy_ms / 1000))


def test_the_ramp_and_the_oracle():
    ramp = Ramp(seconds=600, base=2)
    assert [ramp.rate(t) for t in (0, 59, 270, 300, 329, 594, 599)] == pytest.approx([2, 2, 20, 20, 20, 2, 2])
    assert ramp.rate(165) == pytest.approx(11) and ramp.starts == 60
    assert [saturated_replicas(ramp, t, 3.85, 1) for t in (0, 300)] == [1, 6]


def test_the_oracle_holds_the_target_with_the_fewest_replicas_and_more_traffic_never_needs_fewer():
    oracle = Oracle(PROFILE, TTFT_TARGET_MS, floor=1, seconds=300, step=1.0)
    needs = [oracle.replicas(rate) for rate in (1, 2, 3, 6, 12, 20)]
    assert needs == sorted(needs) and needs[0] == 1
    # More than the saturated count at a low rate (a lone replica's line past 80 % of its slots), about it at
    # 20/s (many replicas share the line).
    assert needs[2] == 2 and needs[-1] <= saturated_replicas(Ramp(600, 2), 300, 3.85, 1) + 1
    for rate, n in zip((3, 6, 12, 20), needs[2:], strict=True):
        assert oracle.holds(rate, n) and not oracle.holds(rate, n - 1), (rate, n)
    assert oracle.replicas(2.5) == oracle.replicas(3)  # a rate between steps takes the step above


def test_gpu_hours_and_flaps():
    # 2 replicas for 1800 s, then 4 for the last 1800 s, 8 GPUs each: (2 + 4) × 0.5 h × 8.
    assert gpu_hours([(0.0, 2), (1800.0, 4)], 3600, 8) == pytest.approx(24.0)
    out, into = {"action": "scale_out"}, {"action": "scale_in"}
    assert flaps([(0, out), (50, out), (100, into), (120, out)], cooldown=45) == (1, 2)
    assert flaps([(0, out), (300, into)], cooldown=45) == (0, 1)

"""bench/autoscale.py's arithmetic, without a plane (the run itself takes minutes: docs/autoscaling.md#measured):
its oracle's capacity is the sim's own load model's, the ramp goes 1× → 10× → 1×, GPU-hours integrate held
readings, and a flap is a reversal within the cooldown."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from autoscale import (  # noqa: E402
    OUTPUT_TOKENS,
    PROFILE,
    PROMPT_TOKENS,
    Ramp,
    flaps,
    gpu_hours,
    oracle_replicas,
    saturated_capacity,
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
    assert [oracle_replicas(ramp, t, 3.85, 1) for t in (0, 300)] == [1, 6]


def test_gpu_hours_and_flaps():
    # 2 replicas for 1800 s, then 4 for the last 1800 s, 8 GPUs each: (2 + 4) × 0.5 h × 8.
    assert gpu_hours([(0.0, 2), (1800.0, 4)], 3600, 8) == pytest.approx(24.0)
    out, into = {"action": "scale_out"}, {"action": "scale_in"}
    assert flaps([(0, out), (50, out), (100, into), (120, out)], cooldown=45) == (1, 2)
    assert flaps([(0, out), (300, into)], cooldown=45) == (0, 1)

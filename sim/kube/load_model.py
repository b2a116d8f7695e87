"""A serving engine under load, as the simulated frontends model it (pure: no clock, no I/O).

The ideas are those of NVIDIA Dynamo's mocker engine, reduced to what an autoscaler can observe:
each replica of a deployment runs at most `max_num_seqs` sequences at once (continuous batching);
a request beyond every replica's slots waits in one FIFO line, and its wait counts in its time to
first token. Prefill time grows with the input length; a decode step (the time per output token of
every sequence in the batch) grows with the replica's batch, from `tpot_ms_at_batch_1` to
`tpot_ms_at_max_batch` at a full batch. A prefill shares the replica with the batch's decode steps,
so it slows by the same factor as a decode step does.

The figures come from a `LoadProfile`: the default is instantaneous (zero latency, a simulated
frontend answers at once as it always did); a profile is set per deployment by the DGD annotation
`wingsmith.dev/sim-load-profile` (small JSON, `parse_profile`) or through the sim's admin API
(`LoadSettings`). `Scheduler` holds the slots and the line; `simulate` drives it on a virtual clock
(what the tests reason about), the frontend drives the same scheduler on the real clock
(`sim/kube/serving.py`).
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

PROFILE_ANNOTATION = "wingsmith.dev/sim-load-profile"
# vLLM's long-standing default for `--max-num-seqs`, used when neither the profile nor the worker says.
DEFAULT_MAX_NUM_SEQS = 256
MAX_NUM_SEQS = 4096
MAX_PROFILE_CHARS = 1024
MAX_TTFT_MS_AT_1K = 60_000.0
MAX_TPOT_MS = 10_000.0
# No prefill lasts longer than this, however far a batch slows a long prompt down.
MAX_PREFILL_MS = 600_000.0
# What one request may ask the model for: input tokens are estimated from its text, output tokens are
# its `max_tokens`; both are clamped to these, so no request can hold a slot for hours.
MAX_INPUT_TOKENS = 131_072
MAX_OUTPUT_TOKENS = 32_768
DEFAULT_OUTPUT_TOKENS = 64
CHARS_PER_TOKEN = 4


class LoadProfile(BaseModel):
    """How fast one replica of a deployment serves, unloaded and at a full batch (milliseconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    ttft_ms_at_1k_isl: float = Field(0.0, ge=0, le=MAX_TTFT_MS_AT_1K,
                                     description="prefill time of a 1,000-token prompt on an idle replica")
    tpot_ms_at_batch_1: float = Field(0.0, ge=0, le=MAX_TPOT_MS,
                                      description="time per output token with one sequence running")
    tpot_ms_at_max_batch: float | None = Field(None, ge=0, le=MAX_TPOT_MS,
                                               description="time per output token with every slot busy; "
                                                           "None: the same as at batch 1")
    max_num_seqs: int | None = Field(None, ge=1, le=MAX_NUM_SEQS,
                                     description="slots per replica; None: the worker's `--max-num-seqs`, "
                                                 f"else {DEFAULT_MAX_NUM_SEQS}")

    @field_validator("ttft_ms_at_1k_isl", "tpot_ms_at_batch_1", "tpot_ms_at_max_batch")
    @classmethod
    def _to_the_microsecond(cls, value: float | None) -> float | None:
        # Finer figures mean nothing to a clock-driven sleep, and a vanishing step time would make the
        # slowdown of a batch (a ratio to it) blow up.
        return None if value is None else round(value, 3)

    @model_validator(mode="after")
    def _decode_slows_with_the_batch(self) -> LoadProfile:
        if self.tpot_ms_at_max_batch is not None and self.tpot_ms_at_max_batch < self.tpot_ms_at_batch_1:
            raise ValueError("tpot_ms_at_max_batch must not be below tpot_ms_at_batch_1: a fuller batch "
                             "decodes no faster")
        return self

    @property
    def tpot_ms_full(self) -> float:
        return self.tpot_ms_at_batch_1 if self.tpot_ms_at_max_batch is None else self.tpot_ms_at_max_batch

    @property
    def instantaneous(self) -> bool:
        return self.ttft_ms_at_1k_isl == 0 and self.tpot_ms_at_batch_1 == 0 and self.tpot_ms_full == 0


DEFAULT_PROFILE = LoadProfile()

DeploymentKey = Annotated[str, StringConstraints(
    pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=317)]


class LoadSettings(BaseModel):
    """A cluster's load profiles, set from a test or the admin route; they win over the annotation
    (per deployment) or stand in for it (`default`). Not persisted, not reset with the faults."""

    model_config = ConfigDict(validate_assignment=True, extra="forbid")

    default: LoadProfile | None = Field(None, description="for every deployment on the cluster that sets none")
    deployments: dict[DeploymentKey, LoadProfile] = Field(
        default_factory=dict, max_length=1000, description='per deployment, keyed "<namespace>/<dgd name>"')

    def profile_for(self, namespace: str, name: str) -> LoadProfile | None:
        return self.deployments.get(f"{namespace}/{name}")


@lru_cache(maxsize=256)
def parse_profile(text: str) -> tuple[LoadProfile | None, str | None]:
    """The profile an annotation's text states, or None and why not (never raises: it is input)."""
    if len(text) > MAX_PROFILE_CHARS:
        return None, f"longer than {MAX_PROFILE_CHARS} characters"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    try:
        return LoadProfile.model_validate(data), None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'profile'}: {e['msg']}" for e in exc.errors())
        return None, problems[:500]


# ---- the performance model ---------------------------------------------------------------------

def step_ms(profile: LoadProfile, batch: int, slots: int) -> float:
    """One decode step of a replica running `batch` sequences: every one of them gets a token."""
    if slots <= 1 or batch <= 1:
        return profile.tpot_ms_at_batch_1
    share = (min(batch, slots) - 1) / (slots - 1)
    return profile.tpot_ms_at_batch_1 + (profile.tpot_ms_full - profile.tpot_ms_at_batch_1) * share


def prefill_ms(profile: LoadProfile, input_tokens: int, batch: int, slots: int) -> float:
    """A prompt's prefill on a replica running `batch` sequences (itself included): linear in its
    length, slowed as the batch's decode steps are, and never shorter than one step."""
    step, idle = step_ms(profile, batch, slots), profile.tpot_ms_at_batch_1
    alone = profile.ttft_ms_at_1k_isl * max(input_tokens, 0) / 1000
    slowdown = step / idle if idle > 0 else 1.0
    return min(max(alone * slowdown if alone > 0 else 0.0, step), MAX_PREFILL_MS)


def input_tokens(text_chars: int) -> int:
    """Roughly what a tokenizer makes of that many characters of prompt (at least one token)."""
    return max(1, min(MAX_INPUT_TOKENS, math.ceil(max(text_chars, 0) / CHARS_PER_TOKEN)))


# ---- slots and the line ------------------------------------------------------------------------

@dataclass(frozen=True)
class Admission:
    """A request that got a slot: on which replica, and how many sequences that replica runs with it."""

    request: Hashable
    replica: int
    batch: int


class Scheduler:
    """The slots of a deployment's replicas and the one FIFO line in front of them.

    A request takes a slot on the least busy replica (the lowest-numbered of equals) if one is free
    and nobody is waiting; otherwise it joins the line, and the line's head takes the next slot that
    frees. Fewer replicas or slots never cut a running request short: they only stop admissions
    until the running ones fit."""

    def __init__(self, replicas: int = 1, slots: int = DEFAULT_MAX_NUM_SEQS):
        self._replicas, self._slots = max(replicas, 0), max(slots, 1)
        self._batch: list[int] = [0] * self._replicas
        self._on: dict[Hashable, int] = {}
        self._line: dict[Hashable, None] = {}  # insertion-ordered: the head is the first key

    @property
    def replicas(self) -> int:
        return self._replicas

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def running(self) -> int:
        return len(self._on)

    @property
    def queued(self) -> int:
        return len(self._line)

    def batch(self, replica: int) -> int:
        return self._batch[replica] if replica < len(self._batch) else 0

    def batches(self) -> list[int]:
        return list(self._batch)

    def waiting(self) -> list[Hashable]:
        return list(self._line)

    def replica_of(self, request: Hashable) -> int | None:
        return self._on.get(request)

    def resize(self, replicas: int, slots: int) -> list[Admission]:
        """New capacity (a scale, another profile): the line moves into whatever it frees."""
        self._replicas, self._slots = max(replicas, 0), max(slots, 1)
        if len(self._batch) < self._replicas:
            self._batch.extend([0] * (self._replicas - len(self._batch)))
        self._trim()
        return self._fill()

    def arrive(self, request: Hashable) -> Admission | None:
        """A new request: its admission, or None while it waits in line."""
        if request in self._on or request in self._line:
            raise ValueError(f"request {request!r} is already here")
        replica = self._free_replica() if not self._line else None
        if replica is None:
            self._line[request] = None
            return None
        return self._admit(request, replica)

    def leave(self, request: Hashable) -> list[Admission]:
        """A request finished (or its client went away, waiting or not): who takes its place."""
        if request in self._line:
            del self._line[request]
            return []
        replica = self._on.pop(request, None)
        if replica is None:
            return []
        self._batch[replica] -= 1
        self._trim()
        return self._fill()

    def _admit(self, request: Hashable, replica: int) -> Admission:
        self._on[request] = replica
        self._batch[replica] += 1
        return Admission(request, replica, self._batch[replica])

    def _free_replica(self) -> int | None:
        best = None
        for replica in range(self._replicas):
            n = self._batch[replica]
            if n < self._slots and (best is None or n < self._batch[best]):
                best = replica
        return best

    def _fill(self) -> list[Admission]:
        admitted = []
        while self._line and (replica := self._free_replica()) is not None:
            head = next(iter(self._line))
            del self._line[head]
            admitted.append(self._admit(head, replica))
        return admitted

    def _trim(self) -> None:
        """Forget replicas past the count once their last sequence left (they were scaled away)."""
        while len(self._batch) > self._replicas and self._batch[-1] == 0:
            self._batch.pop()


# ---- the model on a virtual clock ---------------------------------------------------------------

@dataclass(frozen=True)
class Arrival:
    at_ms: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Outcome:
    """What one request saw, in milliseconds from the start of the run."""

    arrival_ms: float
    admitted_ms: float
    first_token_ms: float
    finished_ms: float
    replica: int
    output_tokens: int

    @property
    def ttft_ms(self) -> float:
        return self.first_token_ms - self.arrival_ms

    @property
    def wait_ms(self) -> float:
        return self.admitted_ms - self.arrival_ms

    @property
    def tpot_ms(self) -> float:
        return (self.finished_ms - self.first_token_ms) / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0


# Ties at one instant: a sequence's token (which may free a slot) before a prefill's end, before an arrival.
_TOKEN, _FIRST, _ARRIVE = 0, 1, 2


def simulate(profile: LoadProfile, arrivals: Sequence[Arrival], replicas: int = 1,
             slots: int | None = None) -> list[Outcome]:
    """Run the arrivals through a deployment of `replicas` replicas on a virtual clock, token by token
    as the frontends do on the real one; one outcome per arrival, in the arrivals' order."""
    slots = slots or profile.max_num_seqs or DEFAULT_MAX_NUM_SEQS
    scheduler = Scheduler(replicas, slots)
    events: list[tuple[float, int, int, int]] = []  # (time, kind, request, arrival order as a tie-break)
    for i, arrival in enumerate(arrivals):
        heapq.heappush(events, (arrival.at_ms, _ARRIVE, i, i))
    admitted: dict[int, float] = {}
    placed: dict[int, int] = {}
    first: dict[int, float] = {}
    left: dict[int, int] = {}  # tokens still to come
    done: dict[int, float] = {}

    def start(admission: Admission, now: float) -> None:
        i = admission.request
        assert isinstance(i, int)
        admitted[i], placed[i] = now, admission.replica
        cost = prefill_ms(profile, arrivals[i].input_tokens, admission.batch, slots)
        heapq.heappush(events, (now + cost, _FIRST, i, i))

    def token_due(i: int, now: float) -> None:
        if left[i] == 0:
            done[i] = now
            for admission in scheduler.leave(i):
                start(admission, now)
            return
        replica = scheduler.replica_of(i)
        assert replica is not None
        heapq.heappush(events, (now + step_ms(profile, scheduler.batch(replica), slots), _TOKEN, i, i))

    while events:
        now, kind, i, _ = heapq.heappop(events)
        if kind == _ARRIVE:
            if (admission := scheduler.arrive(i)) is not None:
                start(admission, now)
        elif kind == _FIRST:
            first[i] = now
            left[i] = max(arrivals[i].output_tokens, 1) - 1
            token_due(i, now)
        else:
            left[i] -= 1
            token_due(i, now)
    return [Outcome(a.at_ms, admitted[i], first[i], done[i], placed[i], max(a.output_tokens, 1))
            for i, a in enumerate(arrivals)]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..100) of the values, or None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]

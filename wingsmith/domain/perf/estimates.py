"""What an estimate asks and answers: the plane's words for AIConfigurator's figures.

One request names a model (AIConfigurator's own name for it, or the Hugging Face repo id with its
config.json), a card, a layout, a backend and a workload (ISL/OSL, optional TTFT/TPOT targets); the
answer is one entry per mode (aggregated, disaggregated), each either a configuration with its figures
or, where the tool does not support the model, card or backend, the reason in words. Nothing is filled
in where the tool gave nothing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from wingsmith.domain.hardware import get_hardware
from wingsmith.domain.sizing.layouts import LAYOUTS

Mode = Literal["agg", "disagg"]
MODES: tuple[Mode, ...] = ("agg", "disagg")
BACKENDS = ("vllm", "sglang", "trtllm")
# A prompt or an answer longer than any model's context today: beyond it the input is a mistake.
MAX_TOKENS = 2_000_000
# The plane's default workload when the recipe publishes none (AIConfigurator's own default too).
DEFAULT_ISL = 4000
DEFAULT_OSL = 1000
NOT_INSTALLED = "no performance estimate: the perf extra is not installed"
# The latency targets AIConfigurator assumes when none is given (its CLI's defaults), so a draft's figures
# match what `aiconfigurator cli default` prints for the same model, card and workload.
DEFAULT_TTFT_MS = 2000.0
DEFAULT_TPOT_MS = 30.0
# Points of the throughput trade-off kept per mode: enough to draw it, small in a workflow's history.
MAX_FRONTIER_POINTS = 64


class EstimateRequest(BaseModel, frozen=True):
    model: str = Field(min_length=1, max_length=200,
                       description="AIConfigurator's model name (a Hugging Face repo id it ships) or the repo id")
    model_commit: str | None = Field(default=None, max_length=64, description="the commit the figures are for")
    config: dict | None = Field(default=None, description="the model's config.json, for a model the tool does "
                                "not ship; never fetched by the tool itself")
    card: str = Field(min_length=1, max_length=40)
    layout: str = "single_node_tp"
    backend: str = "vllm"
    isl: int = Field(default=DEFAULT_ISL, ge=1, le=MAX_TOKENS)
    osl: int = Field(default=DEFAULT_OSL, ge=1, le=MAX_TOKENS)
    ttft_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    tpot_ms: float | None = Field(default=None, gt=0, le=60_000)
    gpus: int | None = Field(default=None, ge=1, le=4096, description="GPU budget; unset: the layout's")

    @model_validator(mode="after")
    def _known(self) -> EstimateRequest:
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {self.layout!r}; known: {', '.join(LAYOUTS)}")
        get_hardware(self.card)  # an unknown card is refused with the known ones named
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; known: {', '.join(BACKENDS)}")
        return self

    @property
    def latency_targets(self) -> tuple[float, float]:
        """The TTFT and TPOT targets (ms) the tool is asked to meet: the request's, else the tool's defaults."""
        return self.ttft_ms or DEFAULT_TTFT_MS, self.tpot_ms or DEFAULT_TPOT_MS

    def config_digest(self) -> str | None:
        if self.config is None:
            return None
        return hashlib.sha256(json.dumps(self.config, sort_keys=True).encode()).hexdigest()[:16]


class Source(BaseModel, frozen=True):
    tool: str = "AIConfigurator"
    version: str
    database: str = Field(description="the performance database the figures come from, e.g. 'h200_sxm vllm 0.24.0'")

    def __str__(self) -> str:
        return f"{self.tool} {self.version}, database {self.database}"


class Parallelism(BaseModel, frozen=True):
    tp: int
    pp: int = 1
    dp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def __str__(self) -> str:
        text = f"TP{self.tp}"
        for name, value in (("PP", self.pp), ("DP", self.dp), ("MoE TP", self.moe_tp), ("EP", self.moe_ep)):
            text += f" {name}{value}" if value > 1 else ""
        return text


class Pool(BaseModel, frozen=True):
    """Workers of one kind in a replica: all of an aggregated replica, or its prefill or decode side."""
    workers: int
    gpus_per_worker: int
    parallelism: Parallelism
    batch_size: int = Field(description="sequences one worker runs at once (vLLM's --max-num-seqs)")


class Configuration(BaseModel, frozen=True):
    """A serving configuration and what it delivers, for the whole GPU budget (every replica)."""
    mode: Mode
    tokens_per_second_per_gpu: float
    tokens_per_second_per_user: float
    ttft_ms: float
    tpot_ms: float
    concurrency: int = Field(description="requests in flight across every replica")
    gpus: int = Field(description="GPUs used across every replica")
    replicas: int
    gpus_per_replica: int
    requests_per_second_per_replica: float
    parallelism: str = Field(description="in words, e.g. 'TP2' or 'prefill 4 × TP1, decode 1 × TP4'")
    workers: list[Pool] = Field(description="agg: one pool; disagg: prefill then decode")

    @property
    def requests_per_second(self) -> float:
        return self.requests_per_second_per_replica * self.replicas


class FrontierPoint(BaseModel, frozen=True):
    tokens_per_second_per_user: float
    tokens_per_second_per_gpu: float
    # The configuration's latencies as the tool reported them; None in estimates cached before they were kept.
    ttft_ms: float | None = None
    tpot_ms: float | None = None


class EstimatedFor(BaseModel, frozen=True):
    """What an estimate is of: one card × layout × mode, with the engine and the request shape."""
    card: str
    layout: str
    mode: Mode
    backend: str
    isl: int
    osl: int


class PerformanceEntry(EstimatedFor, frozen=True):
    """One card × layout × mode of a draft's `performance`: figures, or why there are none."""
    source: Source | None = None
    configuration: Configuration | None = None
    frontier: list[FrontierPoint] = Field(default_factory=list, max_length=MAX_FRONTIER_POINTS)
    reason: str | None = Field(default=None, description="why there are no figures, in words")


class Estimate(BaseModel, frozen=True):
    request: EstimateRequest
    entries: list[PerformanceEntry]
    cached: bool = False
    seconds: float = Field(default=0.0, description="how long the tool ran (0 for a cached answer)")

    def entry(self, mode: Mode) -> PerformanceEntry:
        return next(e for e in self.entries if e.mode == mode)


def unsupported_entries(request: EstimateRequest, reason: str, source: Source | None = None) -> list[PerformanceEntry]:
    return [PerformanceEntry(card=request.card, layout=request.layout, mode=mode, backend=request.backend,
                             isl=request.isl, osl=request.osl, source=source, reason=reason)
            for mode in MODES]


def thin_frontier(points: list[FrontierPoint], limit: int = MAX_FRONTIER_POINTS) -> list[FrontierPoint]:
    """At most `limit` points, evenly spread and keeping both ends, ordered by throughput per user."""
    ordered = sorted(points, key=lambda p: p.tokens_per_second_per_user)
    if len(ordered) <= limit:
        return ordered
    step = (len(ordered) - 1) / (limit - 1)
    return [ordered[round(i * step)] for i in range(limit)]

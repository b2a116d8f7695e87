"""Per card, three layouts side by side, each with the backend it is for: the one NVIDIA's Dynamo recipes
deploy (their workers, TP/DP and counts), the one AIConfigurator recommends, and the one the plane chose
(with why). They differ for good reasons (Dynamo's recipes are tuned deployments, often on another backend;
AIConfigurator searches for throughput per GPU under latency targets; the plane holds the floor at the fewest
GPUs), so a reviewer sees all three rather than one presented as the answer. Pure."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel

from wingsmith.domain.hardware import HARDWARE
from wingsmith.domain.recipes.concurrency import dynamo_entries
from wingsmith.domain.recipes.evidence import Evidence
from wingsmith.domain.recipes.models import Catalog, DynamoEntry, DynamoWorker

PLANE_BACKEND = "vllm"  # the plane serves through Dynamo's vLLM worker


class _Row(Protocol):
    """A draft's performance row (wingsmith.domain.draft_performance.PerformanceRow), as far as this view reads it."""
    card: str
    layout: str
    mode: str
    backend: str
    parallelism: str | None
    replicas: int | None
    gpus_per_replica: int | None
    tokens_per_second_per_gpu: float | None
    source: str | None
    reason: str | None


class DeployedLayout(BaseModel, frozen=True):
    """What one Dynamo recipe deploys for the model on this card."""
    source_path: str
    backend: str
    mode: str
    workers: list[str]  # in words: "1 × aggregated worker: TP 2, 2 GPUs"
    card_words: str  # how the recipe names the card (a node label, a claim, a folder, a generation)


class RecommendedLayout(BaseModel, frozen=True):
    backend: str
    layout: str
    mode: str
    parallelism: str
    replicas: int | None
    gpus_per_replica: int | None
    tokens_per_second_per_gpu: float | None
    source: str | None


class ChosenLayout(BaseModel, frozen=True):
    backend: str = PLANE_BACKEND
    layout: str
    gpus: int
    nodes: int
    reason: str


class CardLayouts(BaseModel, frozen=True):
    card: str
    name: str
    deployed: list[DeployedLayout]
    recommended: list[RecommendedLayout]
    chosen: ChosenLayout | None


def worker_words(worker: DynamoWorker) -> str:
    sizes = [f"TP {worker.tensor_parallel_size}" if worker.tensor_parallel_size else "TP not stated"]
    if worker.data_parallel_size:
        sizes.append(f"DP {worker.data_parallel_size}")
    gpus = f"{worker.gpus} GPU(s)" if worker.gpus is not None else "GPUs not stated"
    nodes = f" × {worker.nodes} nodes" if worker.nodes > 1 else ""
    return f"{worker.replicas} × {worker.role} worker: {', '.join(sizes)}, {gpus}{nodes}"


def _card_words(entry: DynamoEntry) -> str:
    if entry.card:
        return f"{entry.card_label or entry.card} ({entry.card_source})"
    if entry.card_family:
        return f"{entry.card_family} ({entry.card_source}; any of {', '.join(entry.family_cards)})"
    return "not stated"


def _deployed_on(entry: DynamoEntry, card: str) -> bool:
    return entry.card == card or (entry.card is None and card in entry.family_cards)


def _recommended(rows: list[Any], card: str) -> list[RecommendedLayout]:
    """AIConfigurator's best row per mode on the card (most tokens per second per GPU)."""
    best: dict[str, Any] = {}
    for row in rows:
        if row.card != card or row.reason or row.tokens_per_second_per_gpu is None:
            continue
        if row.mode not in best or row.tokens_per_second_per_gpu > best[row.mode].tokens_per_second_per_gpu:
            best[row.mode] = row
    return [RecommendedLayout(backend=r.backend, layout=r.layout, mode=r.mode, parallelism=r.parallelism or "",
                              replicas=r.replicas, gpus_per_replica=r.gpus_per_replica,
                              tokens_per_second_per_gpu=r.tokens_per_second_per_gpu, source=r.source)
            for _, r in sorted(best.items())]


def layouts_compared(hf_id: str, evidence: Evidence | None, catalog: Catalog, rows: list[Any] | None = None,
                     chosen: dict[str, ChosenLayout] | None = None) -> list[CardLayouts]:
    """Every placeable card with at least one of the three layouts for this model. `rows`: the draft's
    AIConfigurator rows; `chosen`: the plane's choice per card (else the recipe evidence's shape of the
    default variant on its default layout)."""
    entries = dynamo_entries(hf_id, catalog)
    rows = rows or []
    chosen = dict(chosen or {})
    if evidence is not None:
        for shape in evidence.tested_shapes:
            if shape.variant == evidence.default_variant and shape.hardware not in chosen:
                chosen[shape.hardware] = ChosenLayout(layout=shape.layout, gpus=shape.gpus, nodes=shape.nodes,
                                                      reason=shape.reason or shape.note or "the recipe's shape")
    out = []
    for hw in HARDWARE.values():
        if not hw.placeable:
            continue
        deployed = [DeployedLayout(source_path=e.source_path, backend=e.backend, mode=e.mode,
                                   workers=[worker_words(w) for w in e.workers], card_words=_card_words(e))
                    for e in entries if _deployed_on(e, hw.id)]
        recommended = _recommended(rows, hw.id)
        mine = chosen.get(hw.id)
        if deployed or recommended or mine:
            out.append(CardLayouts(card=hw.id, name=hw.display_name, deployed=deployed, recommended=recommended,
                                   chosen=mine))
    return out

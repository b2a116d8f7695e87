"""The draft's memory picture: for each sized variant, one GPU of the shape it was sized on, filled with
weights, KV cache, activations and runtime overhead, against the card's memory and beside the recipe's
published floor divided over the same GPUs (the floor is for the whole replica)."""

from __future__ import annotations

from markupsafe import Markup
from pydantic import BaseModel

from console.charts import BarRow, Segment, stacked_bars
from console.words import card_name, layout_name
from wingsmith.domain.drafts import VariantSizing
from wingsmith.domain.hardware import HARDWARE
from wingsmith.domain.recipes.evidence import Evidence

PARTS = (("weights", "weights"), ("kv_cache", "KV cache"), ("activations", "activations"),
         ("runtime_overhead", "runtime overhead"))


class MemoryRow(BaseModel):
    variant: str
    shape: str  # "8 × H200, Tensor Parallel"
    parts: list[tuple[str, float]]  # (what, GB per GPU)
    budget_gb: float  # what vLLM may use (utilization × memory)
    card_gb: float | None
    published_per_gpu_gb: float | None
    fits: bool

    @property
    def total_gb(self) -> float:
        return sum(gb for _, gb in self.parts)


def memory_rows(evidence: Evidence | None, sizing: list[VariantSizing]) -> list[MemoryRow]:
    published = {v.name: v.vram_minimum_gb for v in evidence.variants} if evidence else {}
    rows = []
    for s in sizing:
        if s.report is None:
            continue
        fit = s.report.fit
        usage = fit.per_gpu
        hw = HARDWARE.get(fit.hardware)
        floor = published.get(s.variant)
        rows.append(MemoryRow(
            variant=s.variant, shape=f"{fit.gpus} × {card_name(fit.hardware)}, {layout_name(fit.layout)}",
            parts=[(words, round(getattr(usage, key).value / 1e9, 2)) for key, words in PARTS],
            budget_gb=round(usage.budget.value / 1e9, 2), card_gb=hw.memory_gb_per_gpu if hw else None,
            published_per_gpu_gb=round(floor / fit.gpus, 2) if floor is not None and fit.gpus else None,
            fits=fit.fits))
    return rows


def memory_chart(rows: list[MemoryRow]) -> Markup:
    bars = []
    for r in rows:
        marks = [Segment(label="card memory", value=r.card_gb)] if r.card_gb is not None else []
        marks.append(Segment(label="vLLM's budget", value=r.budget_gb))
        if r.published_per_gpu_gb is not None:
            marks.append(Segment(label="published floor per GPU", value=r.published_per_gpu_gb))
        bars.append(BarRow(label=f"{r.variant} · {r.shape}",
                           segments=[Segment(label=what, value=gb) for what, gb in r.parts], marks=marks))
    return stacked_bars("GPU memory per GPU for each sized variant", bars, "GB")

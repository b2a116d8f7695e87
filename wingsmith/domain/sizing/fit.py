"""Does a variant fit a hardware, layout, GPU count, context length and concurrency?

Per GPU the budget is `gpu_memory_utilization × device memory` (vLLM's own budget, which covers
everything the engine allocates). Against it go the weight share, the KV cache of the sequences
that GPU serves at the full context, the activation peak of one forward pass, and fixed runtime
overhead: the CUDA context, CUDA graphs, and NCCL buffers whenever GPUs talk to one another.
The verdict is monotone by construction: more GPUs never add to any per-GPU term except the
NCCL buffers (charged once the plan spans two GPUs, and smaller than the weight share they save),
and a shorter context or fewer sequences only shrink the KV cache and the sampler's logits.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from wingsmith.domain.hardware import NVIDIA_HARDWARE, Hardware, get_hardware
from wingsmith.domain.sizing.figures import Figure, SizingError, figure
from wingsmith.domain.sizing.kv_cache import KvCacheSpec, kv_cache_spec_for
from wingsmith.domain.sizing.layouts import InvalidLayout, ParallelPlan, candidate_gpu_counts, plan
from wingsmith.domain.sizing.model_config import TextModel, read_text_model
from wingsmith.domain.sizing.weights import WeightSplit, split_weights

# The plane's allowances, in bytes. vLLM reports CUDA graph capture at roughly 0.5-1.5 GiB and
# NCCL keeps a few hundred MB of buffers per communicator; the context is what CUDA itself takes.
CUDA_CONTEXT_BYTES = 500_000_000
CUDA_GRAPH_BYTES = 1_000_000_000
NCCL_BYTES = 500_000_000
# vLLM profiles its activation peak with one batch of max_num_batched_tokens tokens.
MAX_NUM_BATCHED_TOKENS = 8192
ACTIVATION_BYTES = 2  # activations run in bf16
LOGIT_BYTES = 4  # the sampler works on float32 logits
MAX_SEARCH_CONTEXT = 1 << 24
MAX_SEARCH_CONCURRENCY = 1 << 20


class GpuUsage(BaseModel, frozen=True):
    budget: Figure
    weights: Figure
    kv_cache: Figure
    activations: Figure
    runtime_overhead: Figure
    total: Figure


class SmallestFit(BaseModel, frozen=True):
    hardware: str
    gpus: int | None
    nodes: int | None
    note: str


class FitReport(BaseModel, frozen=True):
    model_type: str
    hardware: str
    layout: str
    gpus: int
    context: int
    concurrency: int
    gpu_memory_utilization: float
    kv_dtype: str
    plan: ParallelPlan
    per_gpu: GpuUsage
    fits: bool
    verdict: Literal["fits", "kv_cache_does_not_fit", "weights_do_not_fit"]
    headroom_bytes: int
    headroom_gb: float
    largest_context: int  # at the requested concurrency; 0 when not even one token fits
    largest_context_capped_by_model: bool
    largest_concurrency: int  # at the requested context
    smallest_gpus: list[SmallestFit]
    notes: list[str]


class _Sizer:
    """The arithmetic of one (model, weights, kv dtype, utilization): cheap to call many times."""

    def __init__(self, model: TextModel, spec: KvCacheSpec, split: WeightSplit, utilization: float):
        self.model, self.spec, self.split, self.utilization = model, spec, split, utilization

    def usage(self, p: ParallelPlan, hw: Hardware, context: int, concurrency: int) -> GpuUsage:
        m, s = self.model, self.split
        budget = figure(int(hw.memory_bytes_per_gpu * self.utilization), "B",
                        "gpu_memory_utilization × device memory",
                        gpu_memory_utilization=self.utilization, device_memory_bytes=hw.memory_bytes_per_gpu)
        weights = figure(s.dense.value // p.dense_split + s.experts.value // p.expert_split, "B",
                         "dense bytes / dense_split + expert bytes / expert_split",
                         dense_bytes=s.dense.value, dense_split=p.dense_split,
                         expert_bytes=s.experts.value, expert_split=p.expert_split)
        seqs = p.sequences_per_gpu(concurrency)
        per_seq = self.spec.per_rank_sequence_bytes(context, p.tp)
        kv = figure(seqs * per_seq // p.pp, "B",
                    "sequences on this GPU × bytes per sequence per TP rank / pipeline stages",
                    sequences=seqs, context=context, bytes_per_sequence=per_seq, tp=p.tp, pp=p.pp,
                    kv_dtype_bytes=self.spec.kv_dtype_bytes)
        ffn = m.intermediate_size // p.tp
        per_token = (8 * m.hidden_size + 2 * ffn) * ACTIVATION_BYTES
        logits = seqs * m.vocab_size * LOGIT_BYTES
        act = figure(MAX_NUM_BATCHED_TOKENS * per_token + logits, "B",
                     "batched tokens × (8 × hidden + 2 × intermediate / tp) × 2 B"
                     " + sequences × vocab × 4 B",
                     batched_tokens=MAX_NUM_BATCHED_TOKENS, hidden=m.hidden_size,
                     intermediate=m.intermediate_size, tp=p.tp, sequences=seqs, vocab=m.vocab_size)
        talks = p.tp > 1 or p.pp > 1 or p.expert_split > 1
        nccl = NCCL_BYTES if talks else 0
        overhead = figure(CUDA_CONTEXT_BYTES + CUDA_GRAPH_BYTES + nccl, "B",
                          "CUDA context + CUDA graphs + NCCL buffers (when GPUs communicate)",
                          cuda_context=CUDA_CONTEXT_BYTES, cuda_graphs=CUDA_GRAPH_BYTES, nccl=nccl)
        parts = (weights, kv, act, overhead)
        total = figure(sum(int(f.value) for f in parts), "B",
                       "weights + kv_cache + activations + runtime_overhead",
                       weights=weights.value, kv_cache=kv.value, activations=act.value,
                       runtime_overhead=overhead.value)
        return GpuUsage(budget=budget, weights=weights, kv_cache=kv, activations=act,
                        runtime_overhead=overhead, total=total)

    def fits(self, p: ParallelPlan, hw: Hardware, context: int, concurrency: int) -> bool:
        u = self.usage(p, hw, context, concurrency)
        return u.total.value <= u.budget.value

    def largest(self, fits_at, high: int) -> int:
        """Largest n in [0, high] with fits_at(n), for a predicate that only turns false once."""
        if not fits_at(1):
            return 0
        low = 1
        while low < high:
            mid = (low + high + 1) // 2
            if fits_at(mid):
                low = mid
            else:
                high = mid - 1
        return low

    def smallest_gpus(self, layout: str, context: int, concurrency: int) -> list[SmallestFit]:
        found = []
        for hw in NVIDIA_HARDWARE:
            result = SmallestFit(hardware=hw.id, gpus=None, nodes=None,
                                 note=f"does not fit any {layout} shape on {hw.display_name} searched")
            for count in candidate_gpu_counts(layout, hw):
                try:
                    p = plan(self.model, layout, count, hw)
                except InvalidLayout:
                    continue
                if self.fits(p, hw, context, concurrency):
                    result = SmallestFit(hardware=hw.id, gpus=count, nodes=p.nodes,
                                         note=f"{count} × {hw.display_name} in {p.nodes} node(s)")
                    break
            found.append(result)
        return found


def _check_request(context: int, concurrency: int, utilization: float) -> None:
    if context < 1:
        raise SizingError(f"context must be at least 1 token, got {context}")
    if concurrency < 1:
        raise SizingError(f"concurrency must be at least 1 sequence, got {concurrency}")
    if not 0 < utilization <= 1:
        raise SizingError(f"gpu_memory_utilization must be in (0, 1], got {utilization}")


def fit_check(config: dict, weight_bytes: int, hardware: str, layout: str, gpus: int, context: int,
              concurrency: int, gpu_memory_utilization: float = 0.9, kv_dtype: str = "auto") -> FitReport:
    """Per-GPU memory, verdict, headroom, the largest context and concurrency that fit, and the
    smallest GPU count that fits on each NVIDIA card, for one deployment shape."""
    model = read_text_model(config)
    return fit_check_for(model, weight_bytes, hardware, layout, gpus, context, concurrency,
                         gpu_memory_utilization, kv_dtype)


def fit_check_for(model: TextModel, weight_bytes: int, hardware: str, layout: str, gpus: int,
                  context: int, concurrency: int, gpu_memory_utilization: float = 0.9,
                  kv_dtype: str = "auto", search_smallest: bool = True) -> FitReport:
    _check_request(context, concurrency, gpu_memory_utilization)
    if weight_bytes <= 0:
        raise SizingError(f"weight bytes must be positive, got {weight_bytes}")
    hw = get_hardware(hardware)
    max_context = model.max_position_embeddings
    if max_context and context > max_context:
        raise SizingError(f"context {context} exceeds the model's max_position_embeddings {max_context}")
    sizer = _Sizer(model, kv_cache_spec_for(model, kv_dtype), split_weights(model, weight_bytes),
                   gpu_memory_utilization)
    p = plan(model, layout, gpus, hw)
    usage = sizer.usage(p, hw, context, concurrency)
    headroom = int(usage.budget.value - usage.total.value)
    fixed = usage.weights.value + usage.runtime_overhead.value + usage.activations.value
    verdict = ("fits" if headroom >= 0 else
               "weights_do_not_fit" if fixed > usage.budget.value else "kv_cache_does_not_fit")
    high = max_context or MAX_SEARCH_CONTEXT
    largest_context = sizer.largest(lambda n: sizer.fits(p, hw, n, concurrency), high)
    largest_concurrency = sizer.largest(lambda n: sizer.fits(p, hw, context, n), MAX_SEARCH_CONCURRENCY)
    notes = []
    if not hw.placeable:
        notes.append(f"{hw.display_name} is not NVIDIA hardware: sized for reference, it cannot be placed")
    if p.sized_pool == "decode":
        notes.append(f"pd_cluster: figures are for the decode pool ({p.tp} of the {gpus} GPUs)")
    if spec_scope := sizer.spec.bytes_per_token_scope:
        notes.append(f"kv bytes per token are {spec_scope}")
    return FitReport(
        model_type=model.model_type, hardware=hw.id, layout=layout, gpus=gpus, context=context,
        concurrency=concurrency, gpu_memory_utilization=gpu_memory_utilization, kv_dtype=kv_dtype,
        plan=p, per_gpu=usage, fits=headroom >= 0, verdict=verdict, headroom_bytes=headroom,
        headroom_gb=round(headroom / 1e9, 2), largest_context=largest_context,
        largest_context_capped_by_model=bool(max_context) and largest_context == max_context,
        largest_concurrency=largest_concurrency,
        smallest_gpus=sizer.smallest_gpus(layout, context, concurrency) if search_smallest else [],
        notes=notes)


class ShapeChoice(BaseModel, frozen=True):
    """The GPU count the plane chose among those offered, and why (the smaller ones passed over, and for what)."""
    gpus: int | None
    reason: str


def smallest_fitting_gpus(config: dict, weight_bytes: int, hardware: str, layout: str, counts: list[int],
                          context: int = 8192, concurrency: int = 16,
                          gpu_memory_utilization: float = 0.9) -> ShapeChoice:
    """The smallest of `counts` whose plan the model allows (its attention and KV heads divide the TP size) and
    whose fit check fits, with the reason each smaller count was passed over: TP as small as memory allows."""
    model = read_text_model(config)
    passed: list[str] = []
    for gpus in sorted(counts):
        try:
            report = fit_check_for(model, weight_bytes, hardware, layout, gpus, context, concurrency,
                                   gpu_memory_utilization, search_smallest=False)
        except InvalidLayout as exc:
            passed.append(f"{gpus}: {exc}")
            continue
        if report.fits:
            why = f"{gpus} GPU(s) is the smallest {layout} shape on {hardware} that fits at context {context} and " \
                  f"concurrency {concurrency}"
            return ShapeChoice(gpus=gpus, reason=why + (f" (passed over {'; '.join(passed)})" if passed else ""))
        passed.append(f"{gpus}: {report.verdict.replace('_', ' ')}")
    return ShapeChoice(gpus=None, reason=f"no {layout} shape on {hardware} among {sorted(counts)} GPUs fits "
                                         f"({'; '.join(passed)})")

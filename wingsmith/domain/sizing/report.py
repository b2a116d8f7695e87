"""The sizing the plane records on a draft and shows in the resolve proposal: weights, floor
comparison, KV cache and one fit check, bundled."""

from __future__ import annotations

from pydantic import BaseModel

from wingsmith.domain.sizing.figures import Figure, figure
from wingsmith.domain.sizing.fit import FitReport, fit_check_for
from wingsmith.domain.sizing.kv_cache import KvCacheSpec, kv_cache_spec_for
from wingsmith.domain.sizing.model_config import read_text_model
from wingsmith.domain.sizing.weights import FloorComparison, WeightSplit, compare_floor, split_weights


class SizingReport(BaseModel, frozen=True):
    model_type: str
    wrapper_model_type: str | None
    variant: str
    weights_bytes: int
    weights_bytes_source: str
    weights_split: WeightSplit
    floor: FloorComparison
    kv_cache: KvCacheSpec
    kv_bytes_per_token: int
    kv_bytes_per_token_scope: str
    fit: FitReport
    fits: bool
    warnings: list[str]

    @property
    def weights_gb(self) -> Figure:
        return figure(round(self.weights_bytes / 1e9, 3), "GB", "weight_bytes / 1e9",
                      weight_bytes=self.weights_bytes)


def size_model(config: dict, weight_bytes: int, weight_bytes_source: str, *, variant: str = "default",
               published_floor_gb: float | None = None, published_is_estimate: bool = False,
               hardware: str = "h200", layout: str = "single_node_tp", gpus: int = 8,
               context: int = 8192, concurrency: int = 16, gpu_memory_utilization: float = 0.9,
               kv_dtype: str = "auto") -> SizingReport:
    """Everything the plane says about one variant's memory, for a draft or a proposal."""
    model = read_text_model(config)
    kv = kv_cache_spec_for(model, kv_dtype)
    floor = compare_floor(weight_bytes, weight_bytes_source, published_floor_gb, published_is_estimate,
                          variant)
    fit = fit_check_for(model, weight_bytes, hardware, layout, gpus, context, concurrency,
                        gpu_memory_utilization, kv_dtype)
    warnings = [floor.message] if floor.level == "warning" else []
    if not fit.fits:
        warnings.append(f"{variant} does not fit {gpus} × {hardware} in {layout} at context {context} "
                        f"and concurrency {concurrency} ({fit.verdict}, short by {-fit.headroom_gb} GB per GPU)")
    return SizingReport(
        model_type=model.model_type, wrapper_model_type=model.wrapper_model_type, variant=variant,
        weights_bytes=weight_bytes, weights_bytes_source=weight_bytes_source,
        weights_split=split_weights(model, weight_bytes), floor=floor, kv_cache=kv,
        kv_bytes_per_token=int(kv.bytes_per_token.value), kv_bytes_per_token_scope=kv.bytes_per_token_scope,
        fit=fit, fits=fit.fits, warnings=warnings)

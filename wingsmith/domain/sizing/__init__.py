"""The plane's own GPU memory estimate from a model config: pure functions over pydantic models,
every number carrying the formula and inputs it came from."""

from wingsmith.domain.sizing.figures import Figure, SizingError
from wingsmith.domain.sizing.fit import FitReport, GpuUsage, SmallestFit, fit_check
from wingsmith.domain.sizing.kv_cache import KvCacheSpec, kv_cache_spec
from wingsmith.domain.sizing.layouts import LAYOUTS, InvalidLayout, ParallelPlan
from wingsmith.domain.sizing.model_config import TextModel, read_text_model
from wingsmith.domain.sizing.report import SizingReport, size_model
from wingsmith.domain.sizing.weights import (
    FloorComparison,
    WeightBytes,
    WeightSplit,
    compare_floor,
    estimate_weight_bytes,
    variant_weight_bytes,
    weights_floor,
)

__all__ = [
    "LAYOUTS", "Figure", "FitReport", "FloorComparison", "GpuUsage", "InvalidLayout", "KvCacheSpec",
    "ParallelPlan", "SizingError", "SizingReport", "SmallestFit", "TextModel", "WeightBytes",
    "WeightSplit", "compare_floor", "estimate_weight_bytes", "fit_check", "kv_cache_spec",
    "read_text_model", "size_model", "variant_weight_bytes", "weights_floor",
]

"""`wingsmith size`: the plane's memory estimate for any config.json, so it can be checked on
models the project does not ship."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from wingsmith.domain.hardware import UnknownHardware
from wingsmith.domain.sizing import LAYOUTS, SizingError, estimate_weight_bytes, read_text_model, size_model
from wingsmith.domain.sizing.kv_cache import KV_DTYPES


def register(sub) -> None:
    p = sub.add_parser("size", help="estimate GPU memory for a model config and check a deployment shape")
    p.add_argument("--config", required=True, type=Path, help="path to the model's config.json")
    p.add_argument("--weights-bytes", type=int, default=None,
                   help="checkpoint weight bytes (default: total_size_bytes of a meta.json next to the "
                        "config, else an estimate from the config's shapes)")
    p.add_argument("--hardware", default="h200")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--layout", default="single_node_tp", choices=LAYOUTS)
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--kv-dtype", default="auto", choices=list(KV_DTYPES))
    p.add_argument("--variant", default="default")
    p.add_argument("--published-floor-gb", type=float, default=None,
                   help="the recipe's published floor for this variant, to compare with")
    p.add_argument("--published-is-estimate", action="store_true")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.set_defaults(func=_run)


def _weights(config: dict, config_path: Path, given: int | None) -> tuple[int, str]:
    if given is not None:
        if given <= 0:
            raise SizingError(f"--weights-bytes must be positive, got {given}")
        return given, "--weights-bytes"
    meta = config_path.with_name("meta.json")
    if meta.is_file():
        total = json.loads(meta.read_text()).get("total_size_bytes")
        if total:
            return int(total), f"{meta} total_size_bytes"
    estimate = estimate_weight_bytes(read_text_model(config))
    return estimate.bytes, estimate.source


def _run(args) -> int:
    try:
        try:
            config = json.loads(args.config.read_text())
        except OSError as e:
            raise SizingError(f"cannot read --config {args.config}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise SizingError(f"--config {args.config} is not valid JSON: {e}") from None
        weight_bytes, source = _weights(config, args.config, args.weights_bytes)
        report = size_model(config, weight_bytes, source, variant=args.variant,
                            published_floor_gb=args.published_floor_gb,
                            published_is_estimate=args.published_is_estimate, hardware=args.hardware,
                            layout=args.layout, gpus=args.gpus, context=args.context,
                            concurrency=args.concurrency,
                            gpu_memory_utilization=args.gpu_memory_utilization, kv_dtype=args.kv_dtype)
    except (SizingError, UnknownHardware) as e:
        print(f"wingsmith size: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    fit = report.fit
    gpu = fit.per_gpu
    wrapper = f" (in {report.wrapper_model_type})" if report.wrapper_model_type else ""
    lines = [
        f"model            {report.model_type}{wrapper}",
        f"weights          {report.weights_bytes:,} B ({report.weights_bytes_source})",
        f"floor            {report.floor.message}",
        f"kv per token     {report.kv_bytes_per_token:,} B, {report.kv_bytes_per_token_scope} "
        f"[{report.kv_cache.formula}]",
        f"shape            {fit.gpus} × {fit.hardware} {fit.layout}, context {fit.context}, "
        f"concurrency {fit.concurrency}, kv {fit.kv_dtype}",
        f"per GPU          weights {gpu.weights.value / 1e9:.2f} GB, kv {gpu.kv_cache.value / 1e9:.2f} GB, "
        f"activations {gpu.activations.value / 1e9:.2f} GB, overhead {gpu.runtime_overhead.value / 1e9:.2f} GB"
        f" of {gpu.budget.value / 1e9:.2f} GB",
        f"verdict          {fit.verdict} (headroom {fit.headroom_gb} GB per GPU)",
        f"largest context  {fit.largest_context:,} at concurrency {fit.concurrency}"
        + (" (the model's maximum)" if fit.largest_context_capped_by_model else ""),
        f"largest conc.    {fit.largest_concurrency:,} at context {fit.context}",
        "smallest fit     " + ", ".join(f"{s.hardware}: {s.gpus if s.gpus else '-'}" for s in fit.smallest_gpus),
    ]
    lines += [f"warning          {w}" for w in report.warnings]
    print("\n".join(lines))
    return 0

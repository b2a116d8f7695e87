"""What a workload was predicted to deliver, for the workload page to show beside what the gateway
measures. A workload sized by a traffic target shows the prediction of the configuration AIConfigurator
chose for it, at the target's own ISL/OSL, and the target itself (both kept on its plan, `sized_by`);
any other workload shows the approved draft's estimate (wingsmith.domain.draft_performance) for its card and
layout, at the draft's ISL/OSL."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from wingsmith.domain.draft_performance import DraftPerformance, PerformanceRow
from wingsmith.domain.perf.traffic import TrafficTarget
from wingsmith.domain.workloads import SizedBy


class Predicted(BaseModel):
    card: str
    layout: str
    row: PerformanceRow | None  # None: the draft has no estimate for this card and layout
    status_words: str  # why there is no row, or where the row came from
    sized_by_target: bool
    target: TrafficTarget | None = None  # the traffic target the workload was sized by, when its plan kept it


def predicted_for(draft: dict[str, Any] | None, spec: dict[str, Any]) -> Predicted | None:
    card, layout = spec.get("hardware"), spec.get("layout")
    if not card or not layout:
        return None
    if (sized := _sized_by(spec)) is not None:
        return _of_target(card, layout, sized, str(spec.get("engine") or "vllm"))
    # Sized by a target before plans kept what it was sized by: only the engine arguments' source says so.
    by_target = str(spec.get("max_num_seqs_source") or "").startswith("AIConfigurator")
    stored = ((draft or {}).get("sizing") or {}).get("performance")
    try:
        performance = DraftPerformance.model_validate(stored) if stored else None
    except ValidationError:
        performance = None
    if performance is None:
        return Predicted(card=card, layout=layout, row=None, sized_by_target=by_target,
                         status_words="the approved draft carries no performance estimate")
    rows = [r for r in performance.entries if r.card == card and r.layout == layout]
    # Aggregated first: the draft's pd_cluster rows are the recipe's layout, aggregated or not.
    rows.sort(key=lambda r: (r.mode != "agg", r.ttft_ms is None))
    row = rows[0] if rows else None
    if row is None:
        words = performance.reason or f"the approved draft has no estimate for {card} with {layout}"
    elif row.ttft_ms is None:
        words = row.reason or "AIConfigurator gave no figures for this card and layout"
    else:
        words = row.source or "AIConfigurator"
    return Predicted(card=card, layout=layout, row=row, status_words=words, sized_by_target=by_target)


def _sized_by(spec: dict[str, Any]) -> SizedBy | None:
    stored = spec.get("sized_by")
    try:
        return SizedBy.model_validate(stored) if stored else None
    except ValidationError:
        return None


def _of_target(card: str, layout: str, sized: SizedBy, engine: str) -> Predicted:
    """The chosen configuration's own figures: one replica's, as AIConfigurator predicted them at the target's
    ISL/OSL, for every replica the target needed."""
    conf = sized.configuration
    per_replica = conf.concurrency // max(1, conf.replicas)
    row = PerformanceRow(
        card=sized.card, layout=layout, mode=conf.mode, backend=engine, isl=sized.target.isl, osl=sized.target.osl,
        tokens_per_second_per_gpu=conf.tokens_per_second_per_gpu,
        tokens_per_second_per_user=conf.tokens_per_second_per_user, ttft_ms=conf.ttft_ms, tpot_ms=conf.tpot_ms,
        concurrency=per_replica * sized.replicas, gpus=sized.gpus, replicas=sized.replicas,
        gpus_per_replica=conf.gpus_per_replica, parallelism=conf.parallelism, workers=list(conf.workers),
        source=str(sized.source) if sized.source else "AIConfigurator")
    return Predicted(card=card, layout=layout, row=row, sized_by_target=True, target=sized.target,
                     status_words=f"the configuration AIConfigurator chose for the traffic target ({row.source})")

"""Dynamo's deployment recipes for a model, and the one default the plane takes from them: the
engine's `--max-num-seqs` for a (model, card), from the aggregated vLLM recipe for that card."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from wingsmith.domain.hardware import HARDWARE, hardware_for_product_label
from wingsmith.domain.recipes.command import ServeCommand
from wingsmith.domain.recipes.models import Catalog, DynamoEntry


class MaxNumSeqsDefault(BaseModel, frozen=True):
    model: str
    card: str
    value: int | None  # None: not set, the engine default applies
    reason: str
    source_path: str | None
    source_repository: str | None
    source_commit: str | None
    alternatives: list[dict] = []  # other matching recipes: {source_path, value}
    # Who sets it: the tested vLLM command itself, NVIDIA Dynamo's aggregated recipe, or nobody.
    origin: Literal["vllm recipe", "dynamo recipe", "engine default"] = "dynamo recipe"

    @property
    def engine_default(self) -> bool:
        return self.value is None


def _model_ids(hf_id: str, catalog: Catalog) -> tuple[set[str], set[str]]:
    """The id itself, and the ids of its recipe family (the recipe's path, id and variants)."""
    exact = {hf_id.strip().lower()}
    family = set(exact)
    match = catalog.find(hf_id)
    if match:
        recipe = match.recipe
        family |= {recipe.model_id.lower(), recipe.path.lower()}
        family |= {v.model_id.lower() for v in recipe.variants.values() if v.model_id}
    return exact, family


def dynamo_entries(model_or_hf_id: str, catalog: Catalog) -> list[DynamoEntry]:
    """Dynamo recipes that serve this model or another checkpoint of its vLLM recipe."""
    _, family = _model_ids(model_or_hf_id, catalog)
    names = {i.rsplit("/", 1)[-1] for i in family}
    return [e for e in catalog.dynamo
            if family & {m.lower() for m in e.model_ids} or e.model.lower() in names | family]


def _card_id(card: str) -> str:
    hw = HARDWARE.get(card.lower()) or hardware_for_product_label(card)
    if hw is None:
        raise ValueError(f"unknown card {card!r}; use a hardware id ({', '.join(sorted(HARDWARE))}) "
                         f"or an nvidia.com/gpu.product value such as NVIDIA-H200")
    return hw.id


def max_num_seqs_default(hf_id: str, card: str, catalog: Catalog) -> MaxNumSeqsDefault:
    card_id = _card_id(card)
    exact, _ = _model_ids(hf_id, catalog)
    candidates = [e for e in dynamo_entries(hf_id, catalog)
                  if e.backend == "vllm" and e.mode == "aggregated" and e.card == card_id]
    src = catalog.dynamo_source
    if not candidates:
        return MaxNumSeqsDefault(
            model=hf_id, card=card_id, value=None, source_path=None, source_repository=src.repository,
            source_commit=src.commit, origin="engine default",
            reason=f"no aggregated vLLM Dynamo recipe for {hf_id} on {card_id}: engine default")
    # Deterministic: a recipe serving this exact checkpoint beats one for a sibling checkpoint, a
    # recipe that states a value beats one that does not, then the lowest path.
    ranked = sorted(candidates, key=lambda e: (not (exact & {m.lower() for m in e.model_ids}),
                                               e.max_concurrency.value is None, e.source_path))
    chosen = ranked[0]
    value = chosen.max_concurrency.value
    origin: Literal["dynamo recipe", "engine default"] = "dynamo recipe" if value is not None else "engine default"
    if value is None:
        reason = f"the aggregated vLLM recipe for {card_id} sets no --max-num-seqs: engine default"
    else:
        reason = f"--max-num-seqs {value} from the aggregated vLLM recipe for {card_id}"
    if len(ranked) > 1:
        reason += (f"; chosen over {len(ranked) - 1} other matching recipe(s) by exact checkpoint, "
                   "then a stated value, then path order")
    return MaxNumSeqsDefault(
        model=hf_id, card=card_id, value=value, reason=reason, source_path=chosen.source_path,
        source_repository=src.repository, source_commit=src.commit, origin=origin,
        alternatives=[{"source_path": e.source_path, "value": e.max_concurrency.value} for e in ranked[1:]])


def max_num_seqs_applied(command: ServeCommand, hf_id: str, catalog: Catalog) -> MaxNumSeqsDefault:
    """The `--max-num-seqs` a workload built from `command` runs with: the tested vLLM command's own
    value when it sets one (Kimi-K3's Hopper block sets 5), else Dynamo's aggregated recipe for the card.
    One answer for the workload, the draft and the model page."""
    args = command.commands[0].args if command.commands else command.args
    if "--max-num-seqs" in args:
        value = int(args[args.index("--max-num-seqs") + 1])
        src = catalog.vllm_source
        recipe = catalog.recipes.get(command.recipe)
        return MaxNumSeqsDefault(
            model=hf_id, card=command.hardware, value=value, origin="vllm recipe",
            reason=f"--max-num-seqs {value} from the vLLM recipe's own command for {command.hardware}",
            source_path=recipe.source_path if recipe else None, source_repository=src.repository,
            source_commit=src.commit)
    return max_num_seqs_default(hf_id, command.hardware, catalog)

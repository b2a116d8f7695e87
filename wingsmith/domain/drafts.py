"""A draft: the recipe evidence for an artifact next to the plane's own sizing of each precision
variant, with the warnings a reviewer must see. Pure: the artifact workflow's activities and the
resolve proposal both build it from the same inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from wingsmith.domain.hardware import HARDWARE
from wingsmith.domain.hub.proposal import ArtifactProposal
from wingsmith.domain.recipes import Evidence
from wingsmith.domain.recipes.evidence import HardwareEvidence, TestedShape
from wingsmith.domain.review import DraftFacts
from wingsmith.domain.sizing import SizingError, SizingReport, WeightBytes, size_model, variant_weight_bytes
from wingsmith.domain.sizing.fit import smallest_fitting_gpus
from wingsmith.domain.sizing.layouts import SINGLE_NODE

# Where the plane sizes a model when the recipe names no placeable hardware and tests no shape on one that
# holds the variant's floor: a common 8-GPU node.
_FALLBACK_TARGET = ("h200", "single_node_tp", 8)
_FALLBACK_GPU_GB = HARDWARE["h200"].memory_gb_per_gpu
_FALLBACK_WORDS = "sized for one 8-GPU H200 node"


class SizingTarget(BaseModel):
    """The hardware, layout and GPU count the draft's fit check is run for."""
    hardware: str
    layout: str
    gpus: int
    reason: str
    pin: str | None = Field(default=None, description="the recipe's pin that fixes the GPU count, naming it")


class VariantSizing(BaseModel):
    variant: str
    checkpoint: str
    target: SizingTarget | None = Field(default=None, description="the shape this variant was sized on")
    weight: WeightBytes | None = None
    report: SizingReport | None = None
    note: str | None = Field(default=None, description="why this variant could not be sized, if so")


class DraftContent(BaseModel):
    catalog_version: str | None
    evidence: Evidence | None
    target: SizingTarget
    sizing: list[VariantSizing]
    warnings: list[str]

    def facts(self, version: int) -> DraftFacts:
        return DraftFacts(version=version,
                          variants=[v.name for v in self.evidence.variants] if self.evidence else [],
                          features=[f.name for f in self.evidence.features] if self.evidence else [])


def sizing_target(evidence: Evidence | None, variant: str | None = None,
                  fleet_cards: list[str] | None = None) -> SizingTarget:
    """The recipe's default layout on the GPU count the recipe tests for the variant on a card (the count
    `serve_command` builds; never the layout's bare minimum of one GPU, never below the variant's floor).

    The card: with `fleet_cards` (the cards the registered clusters have), first a card the recipe
    verifies that the fleet has, then another card the fleet has, and only then a verified card the fleet
    lacks, saying so; without it (the fleet unknown), the recipe's verified cards, its default first.

    When none of those has a shape for the variant: one 8 × H200 node, unless that node is below the
    variant's floor; then the variant's first tested shape on a placeable card whose node(s) hold it, or
    the H200 node saying that it is below the floor."""
    if evidence is not None:
        variant = variant or evidence.default_variant
        shapes = {s.hardware: s for s in evidence.tested_shapes if s.variant == variant}
        # Within each tier: the recipe's default card, then a card that holds the replica as the recipe
        # runs it (not a multi-node stand-in for a shape below its floor), then by id.
        def rank(h: HardwareEvidence) -> tuple[bool, bool, str]:
            shape = shapes.get(h.id)
            return h.id != evidence.default_hardware, bool(shape and shape.note), h.id
        for card, where in _ranked_cards(evidence, fleet_cards, rank):
            shape = shapes.get(card.id)
            if shape is None:
                continue  # the variant does not run on this card
            return SizingTarget(hardware=card.id, layout=shape.layout, gpus=shape.gpus, pin=shape.pin,
                                reason=_shape_words(shape, where))
    hw, layout_name, gpus = _FALLBACK_TARGET
    if evidence is None:
        return SizingTarget(hardware=hw, layout=layout_name, gpus=gpus, reason=f"no recipe; {_FALLBACK_WORDS}")
    variant = variant or evidence.default_variant
    if evidence.default_layout is None:
        why = "the recipe has no layout (vLLM-Omni)" if evidence.omni else "the recipe has no layout"
    else:
        why = _below_floor(evidence) or f"variant {variant} runs on no verified placeable card of the recipe"
    floor = next((v.vram_minimum_gb for v in evidence.variants if v.name == variant), None)
    fallback_gb = _FALLBACK_GPU_GB * gpus
    below = floor is not None and fallback_gb < floor
    holding = _first_shape_holding(evidence, variant, floor) if below else None
    if holding is not None:
        shape, card = holding
        return SizingTarget(hardware=card.id, layout=shape.layout, gpus=shape.gpus,
                            reason=f"{why}; sized on the recipe's first tested shape that holds the variant's floor: "
                                   f"{shape.gpus} × {card.display_name} on {shape.nodes} node(s) "
                                   f"({card.status.replace('_', ' ')} by the recipe), "
                                   f"{_gb(_shape_gb(card, shape.gpus))} GB against {_gb(floor)} GB"
                                   f"{_fleet_words(card, fleet_cards)}")
    reason = f"{why}; {_FALLBACK_WORDS}"
    if below:
        reason += (f", whose {_gb(fallback_gb)} GB is below variant {variant}'s floor of {_gb(floor)} GB: "
                   "the recipe tests no shape on a placeable card that holds it")
    return SizingTarget(hardware=hw, layout=layout_name, gpus=gpus, reason=reason)


def _shape_words(shape: TestedShape, where: str) -> str:
    """Why the draft is sized on this shape, in sentences: the shape and the card; when one node is below
    the variant's floor, that; then how its GPU count was chosen. The words follow "sized on 16 × h200
    multi_node_tp:" (`artifacts show`) and "The plane's fit check is for …:" (the draft page)."""
    size = f"{shape.gpus} GPU(s) on {shape.nodes} node(s)"
    how = f" Its GPU count: {shape.reason}." if shape.reason else ""
    if not shape.note:
        return f"the recipe's default layout, {size} as the recipe runs it, on {where}.{how}"
    # The evidence's note ends "; the recipe's <layout> shape instead", which these sentences say already.
    below = shape.note.split("; the recipe's ", 1)[0]
    return f"the recipe's {shape.layout} shape, {size}, on {where}. On one node: {below}.{how}"


def _gb(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "?"


def _shape_gb(card: HardwareEvidence, gpus: int) -> float | None:
    """Device memory of `gpus` GPUs of the card (per node as the taxonomy states it, else per GPU)."""
    if card.memory_gb_per_node is not None and card.gpus_per_node:
        return card.memory_gb_per_node / card.gpus_per_node * gpus
    return card.memory_gb_per_gpu * gpus if card.memory_gb_per_gpu is not None else None


def _first_shape_holding(evidence: Evidence, variant: str,
                         floor: float | None) -> tuple[TestedShape, HardwareEvidence] | None:
    """The variant's first tested shape, in the recipe's order, on a placeable card whose node(s) hold the
    variant's floor: the recipe's own shape stands in for the fixed fallback (Ring-2.6-1T states no card,
    and one 8 × H200 node holds 1,128 GB against its 1,200 GB floor)."""
    cards = {h.id: h for h in evidence.hardware if h.placeable and h.status != "unsupported"}
    for shape in evidence.tested_shapes:
        card = cards.get(shape.hardware)
        if shape.variant != variant or card is None:
            continue
        memory = _shape_gb(card, shape.gpus)
        if floor is None or (memory is not None and memory >= floor):
            return shape, card
    return None


def _fleet_words(card: HardwareEvidence, fleet_cards: list[str] | None) -> str:
    if fleet_cards is None:
        return ""
    fleet = sorted({c.lower() for c in fleet_cards})
    if card.id in fleet:
        return f"; the registered clusters have {card.display_name}"
    return (f"; no registered cluster has {card.display_name} (they have {', '.join(fleet)})" if fleet
            else "; no cluster is registered")


def _below_floor(evidence: Evidence) -> str | None:
    """Why the recipe's own shape is not sized, when it is because that shape is below its floor."""
    layout = next((e for e in evidence.layouts if e.name == evidence.default_layout), None)
    verified = [h.id for h in evidence.hardware if h.placeable and h.status == "verified"]
    for card in verified:
        why = layout.denied.get(card, "") if layout else ""
        if "below its floor" in why:
            return f"the recipe's {layout.name if layout else ''} shape on verified {card} is below its floor ({why})"
    return None


def _ranked_cards(evidence: Evidence, fleet_cards: list[str] | None,
                  rank: Callable[[HardwareEvidence], Any]) -> list[tuple[HardwareEvidence, str]]:
    """Placeable cards to size on, best first, each with the words that say why it was chosen."""
    placeable = [h for h in evidence.hardware if h.placeable and h.status != "unsupported"]
    verified = sorted((h for h in placeable if h.status == "verified"), key=rank)
    if fleet_cards is None:
        return [(h, f"verified {h.display_name}") for h in verified]
    fleet = {c.lower() for c in fleet_cards}
    have = f"they have {', '.join(sorted(fleet))}" if fleet else "none is registered"
    others = sorted((h for h in placeable if h.id in fleet and h.status != "verified"), key=rank)
    return ([(h, f"verified {h.display_name}, which the registered clusters have") for h in verified
             if h.id in fleet]
            + [(h, f"{h.display_name}, which the registered clusters have ({h.status.replace('_', ' ')} by the "
                   "recipe)") for h in others]
            + [(h, f"verified {h.display_name}, which no registered cluster has ({have})")
               for h in verified if h.id not in fleet])


def build_draft_content(proposal: ArtifactProposal, evidence: Evidence | None,
                        resolved_checkpoints: dict[str, int] | None = None,
                        fleet_cards: list[str] | None = None) -> DraftContent:
    """Size every variant: this artifact's own bytes for the variant it is, a resolved checkpoint's
    bytes for variants that live in other repos, else bytes derived from parameters and precision.
    `fleet_cards`: the cards the registered clusters have, to size on those first (None: not known)."""
    resolved_checkpoints = {k.lower(): v for k, v in (resolved_checkpoints or {}).items()}
    target = sizing_target(evidence, fleet_cards=fleet_cards)
    sizing: list[VariantSizing] = []
    variants = evidence.variants if evidence else []
    if not variants:
        sizing.append(_size(proposal, "default", proposal.repo_id, None, False, target, own=True))
    for v in variants:
        own = v.checkpoint.lower() == proposal.repo_id.lower()
        variant_target = sizing_target(evidence, v.name, fleet_cards)
        sizing.append(_size(proposal, v.name, v.checkpoint, v.vram_minimum_gb, v.is_estimate, variant_target, own=own,
                            precision=v.precision, resolved=resolved_checkpoints.get(v.checkpoint.lower())))
    warnings = [w for s in sizing if s.report for w in s.report.warnings]
    warnings += [f"{s.variant}: {s.note}" for s in sizing if s.note]
    return DraftContent(catalog_version=evidence.catalog_version if evidence else None, evidence=evidence,
                        target=target, sizing=sizing, warnings=warnings)


def _smallest_fitting(config: dict, weight_bytes: int, target: SizingTarget) -> SizingTarget:
    """The target at the smallest one-node GPU count, from the recipe's (the smallest that holds the published
    floor) up to the whole node, that the model's heads divide and the plane's fit check holds: TP as small as
    memory allows. A count the recipe pins is kept as it is; so is a multi-node shape."""
    card = HARDWARE.get(target.hardware)
    if target.pin or target.layout not in SINGLE_NODE or card is None:
        return target
    node = card.gpus_per_node
    counts = [n for n in range(target.gpus, node + 1) if node % n == 0] or [target.gpus]
    choice = smallest_fitting_gpus(config, weight_bytes, target.hardware, target.layout, counts)
    if choice.gpus is None or choice.gpus == target.gpus:
        return target
    return target.model_copy(update={"gpus": choice.gpus, "reason": f"{target.reason}; the plane's own check: "
                                                                    f"{choice.reason}"})


def _size(proposal: ArtifactProposal, variant: str, checkpoint: str, floor: float | None, estimate: bool,
          target: SizingTarget, *, own: bool, precision: str | None = None,
          resolved: int | None = None) -> VariantSizing:
    try:
        if own:
            if proposal.weight_bytes is None:
                return VariantSizing(variant=variant, checkpoint=checkpoint, note="no weight bytes for this artifact")
            weight = variant_weight_bytes(checkpoint, resolved_bytes=proposal.weight_bytes)
            weight = weight.model_copy(update={"source": proposal.weight_bytes_source or weight.source})
        else:
            weight = variant_weight_bytes(checkpoint, resolved_bytes=resolved,
                                          parameter_count=proposal.parameters.total, scheme=precision)
        target = _smallest_fitting(proposal.config, weight.bytes, target)
        report = size_model(proposal.config, weight.bytes, weight.source, variant=variant,
                            published_floor_gb=floor, published_is_estimate=estimate, hardware=target.hardware,
                            layout=target.layout, gpus=target.gpus)
        return VariantSizing(variant=variant, checkpoint=checkpoint, target=target, weight=weight, report=report)
    except (SizingError, ValueError) as exc:
        return VariantSizing(variant=variant, checkpoint=checkpoint, target=target, note=str(exc))
    except (ArithmeticError, TypeError, KeyError, IndexError, AttributeError) as exc:
        # Past the config's schema this is a case the sizing did not foresee: the draft says "not sized" and
        # why (an ActivityError here would retry the same data to the same end).
        return VariantSizing(variant=variant, checkpoint=checkpoint, target=target,
                             note=f"not sized: the plane could not size this config ({type(exc).__name__}: {exc})")

"""The model page's short answers (how much GPU memory, which layouts, can Wingsmith serve it, does NVIDIA
publish a Dynamo recipe), the note on decode context parallelism, the recipe data's attribution, and
this model's artifacts, workloads and endpoints on this plane. Every answer is worked out from the
catalog's facts, so it changes when the recipe does."""

from __future__ import annotations

import json
import math
from typing import Any

import asyncpg
from pydantic import BaseModel

from api.auth import Principal
from api.ownership import listing_team
from console.words import UPSTREAM_LICENCE, card_name, layout_name
from wingsmith.adapters.store import artifacts as artifact_store
from wingsmith.adapters.store import endpoints as endpoint_store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.domain.recipes import Catalog, InvalidChoice, Recipe, serve_command
from wingsmith.domain.recipes.evidence import Evidence

DCP_FEATURE = "decode_context_parallelism"


class Answer(BaseModel):
    id: str
    question: str
    answer: str


class Attribution(BaseModel):
    what: str
    repository: str
    commit: str
    licence: str


class DynamoSummary(BaseModel):
    card: str
    modes: list[str]


def _placeable_layouts(evidence: Evidence) -> dict[str, list[str]]:
    """Layout -> the NVIDIA cards the recipe allows it on (only those can be placed)."""
    placeable = {h.id for h in evidence.hardware if h.placeable and h.status != "unsupported"}
    return {lay.name: [hw for hw in lay.allowed if hw in placeable] for lay in evidence.layouts}


def _memory(evidence: Evidence) -> str:
    floors = [v for v in evidence.variants if v.vram_minimum_gb is not None]
    if not floors:
        return ("The recipe publishes no memory floor for this model; register it and the plane sizes it from "
                "its weights.")
    default = next((v for v in floors if v.name == evidence.default_variant), floors[0])
    gb = default.vram_minimum_gb or 0.0
    cards = [h for h in evidence.hardware if h.placeable and h.status != "unsupported" and h.memory_gb_per_gpu]
    per_card = "; ".join(f"{math.ceil(gb / h.memory_gb_per_gpu)} × {h.display_name} ({h.memory_gb_per_gpu:g} GB each)"
                         for h in cards if h.memory_gb_per_gpu)
    others = ", ".join(f"{v.name} ({v.precision}) {v.vram_minimum_gb:g} GB" for v in floors if v is not default)
    text = (f"At least {gb:g} GB of GPU memory for one copy of the {default.name} variant ({default.precision}), "
            "the recipe's published floor for the whole replica (weights × 1.2), before the KV cache.")
    if per_card:
        text += f" That is at least {per_card}."
    if others:
        text += f" Other variants: {others}."
    return text


def _layouts(evidence: Evidence) -> str:
    if not evidence.layouts:
        return "The recipe names no layout for this model (it is served as one process, not split across GPUs)."
    names = [layout_name(lay.name) + (" (the default)" if lay.default else "") for lay in evidence.layouts]
    return f"{len(names)}: " + ", ".join(names) + ". The table of layouts says on which cards each is allowed."


def _servable(evidence: Evidence) -> str:
    by_layout = {lay: cards for lay, cards in _placeable_layouts(evidence).items() if cards}
    if not by_layout:
        return ("No: the recipe allows none of its layouts on an NVIDIA card the plane can place, and serving "
                "goes through NVIDIA Dynamo.")
    cards = sorted({c for cs in by_layout.values() for c in cs}, key=card_name)
    others = [h.display_name for h in evidence.hardware if not h.placeable and h.status != "unsupported"]
    text = (f"Yes: on {', '.join(card_name(c) for c in cards)} through NVIDIA Dynamo, in "
            f"{len(by_layout)} layout{'s' if len(by_layout) != 1 else ''}, once a person approves its draft.")
    if others:
        text += f" The recipe's other hardware ({', '.join(others)}) is shown but cannot be placed."
    return text


def _dynamo(dynamo: list[DynamoSummary], catalog: Catalog) -> str:
    if not dynamo:
        return "No: NVIDIA Dynamo has no recipe for this model, so the engine's defaults apply on every card."
    count = sum(len(d.modes) for d in dynamo)
    each = "; ".join(f"{card_name(d.card)}: {', '.join(d.modes)}" for d in dynamo)
    commit = (catalog.dynamo_source.commit or "unknown")[:12]
    return (f"Yes: {count} recipe{'s' if count != 1 else ''} at commit {commit} ({each}). "
            "Its aggregated vLLM recipe for a card gives the plane its --max-num-seqs there.")


def answers(evidence: Evidence, catalog: Catalog, dynamo: list[DynamoSummary]) -> list[Answer]:
    return [Answer(id="faq-memory", question="How much GPU memory does it need?", answer=_memory(evidence)),
            Answer(id="faq-layouts", question="Which layouts can it use?", answer=_layouts(evidence)),
            Answer(id="faq-serve", question="Can Wingsmith serve it?", answer=_servable(evidence)),
            Answer(id="faq-dynamo", question="Does NVIDIA publish a Dynamo recipe for it?",
                   answer=_dynamo(dynamo, catalog))]


def _flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def dcp_note(recipe: Recipe, evidence: Evidence, catalog: Catalog) -> str | None:
    """Decode context parallelism in the recipe's own terms: its size, the layouts and tensor-parallel size
    it is scoped to (the size must divide TP), and the KV cache dtype and MLA backends it pairs with."""
    feature = recipe.features.get(DCP_FEATURE)
    if feature is None:
        return None
    size = _flag(feature.args, "--decode-context-parallel-size")
    layouts = feature.strategies or [lay.name for lay in evidence.layouts]
    tp = []
    for lay in layouts:
        cards = _placeable_layouts(evidence).get(lay) or [evidence.default_hardware or "h200"]
        try:
            command = serve_command(recipe, evidence.default_variant, cards[0], lay, [], catalog=catalog)
        except (InvalidChoice, LookupError):
            continue
        tp.append(f"{layout_name(lay)} (TP{command.tensor_parallel_size} on {command.nodes} node"
                  f"{'s' if command.nodes != 1 else ''} of {card_name(cards[0])})")
    text = f"DCP{' size ' + size if size else ''} splits the decode phase's KV cache across the tensor-parallel GPUs"
    text += "; its size must divide the tensor-parallel size, so the recipe scopes it to " + (
        ", ".join(tp) if tp else ", ".join(layout_name(lay) for lay in layouts)) + "."
    fp8 = sorted(group for group, o in recipe.hardware_overrides.items() if _flag(o.args, "--kv-cache-dtype") == "fp8")
    if _flag(recipe.base_args, "--kv-cache-dtype") == "fp8":
        fp8 = ["every card"]
    backend = _flag(feature.args, "--attention-backend")
    prefill = None
    raw = _flag(feature.args, "--attention-config")
    if raw:
        try:
            prefill = json.loads(raw).get("mla_prefill_backend")
        except (ValueError, AttributeError):
            prefill = None
    if backend or prefill:
        text += f" It pairs the {backend or 'default'} decode backend with {prefill or 'the default'} MLA prefill"
        text += f" under FP8 KV ({', '.join(fp8)} profile of the recipe)." if fp8 else "."
    elif fp8:
        text += f" The recipe's {', '.join(fp8)} profile stores the KV cache in FP8."
    return text


def attribution(catalog: Catalog) -> list[Attribution]:
    return [Attribution(what="vLLM recipes", repository=catalog.vllm_source.repository,
                        commit=catalog.vllm_source.commit or "unknown", licence=UPSTREAM_LICENCE),
            Attribution(what="NVIDIA Dynamo recipes", repository=catalog.dynamo_source.repository,
                        commit=catalog.dynamo_source.commit or "unknown", licence=UPSTREAM_LICENCE)]


class OnThisPlane(BaseModel):
    artifacts: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    endpoints: list[dict[str, Any]]


async def on_this_plane(db: asyncpg.Pool, principal: Principal, hf_id: str) -> OnThisPlane:
    """This model's artifacts (the organisation's), and the workloads and endpoints of them the person's
    team may see (an admin's: all), as the lists of the REST API show them."""
    artifacts = await artifact_store.list_artifacts(db, model=hf_id, limit=100)
    ids = {a["id"] for a in artifacts}
    team = listing_team(principal)
    workloads = [w for w in await workload_store.list_workloads(db, limit=1000, team=team) if w["artifact_id"] in ids]
    names = {w["id"] for w in workloads}
    endpoints = [e for e in await endpoint_store.list_endpoints(db, team=team)
                 if names & set(e.get("workloads") or [])]
    return OnThisPlane(artifacts=artifacts, workloads=workloads, endpoints=endpoints)

"""What the console shows, built from the plane's own models by pure functions: the draft page and
the public model page share these, so a layout or a command reads the same on both."""

from __future__ import annotations

import shlex

from pydantic import BaseModel

from console.words import SPANS_NODES, feature_words, layout_name, mutually_exclusive
from wingsmith.domain.drafts import VariantSizing
from wingsmith.domain.recipes import (
    Catalog,
    InvalidChoice,
    MaxNumSeqsDefault,
    Recipe,
    ServeCommand,
    max_num_seqs_default,
    serve_command,
)
from wingsmith.domain.recipes.concurrency import max_num_seqs_applied
from wingsmith.domain.recipes.evidence import Evidence, HardwareEvidence, _link

# Plain words for each layout, so a reviewer need not know the strategy files.
LAYOUT_WORDS = {
    "single_node_tp": "One machine. Every GPU holds a slice of each layer (tensor parallel).",
    "single_node_tep": "One machine. Layers are sliced across the GPUs and the experts are spread over them.",
    "single_node_dep": "One machine. Each GPU answers its own requests; the experts are spread over all GPUs.",
    "multi_node_tp": "Several machines act as one copy of the model; each layer is sliced across all their GPUs.",
    "multi_node_tep": "Several machines; layers are sliced across all GPUs and the experts are spread over them.",
    "multi_node_tp_pp": "Several machines; layers are sliced inside each machine and the stack of layers is "
                        "split between machines (pipeline parallel).",
    "multi_node_dep": "Several machines; each GPU answers its own requests while the experts are shared out "
                      "across all of them (data + expert parallel).",
    "multi_node_tp_dp": "Several machines; each machine is one sliced copy and the copies share the requests "
                        "(tensor + data parallel).",
    "pd_cluster": "Two pools of GPUs: one reads prompts (prefill), the other writes answers (decode).",
}

STATUS_WORDS = {"verified": "tested by vLLM", "supported": "said to work by the recipe (no verified run)",
                "unsupported": "not supported by the recipe",
                "not_stated": "not stated by the recipe"}
NOT_PLACEABLE = "no: only NVIDIA GPUs can be placed (serving goes through NVIDIA Dynamo)"


class HardwareRow(BaseModel):
    id: str
    name: str
    maker: str
    status: str
    status_words: str
    gpus_per_node: int | None
    memory_gb_per_gpu: float | None
    placeable: bool
    placeable_words: str
    default: bool


class LayoutRow(BaseModel):
    name: str
    display_name: str
    spans_nodes: bool
    default: bool
    compatible: bool
    words: str
    allowed: list[tuple[str, int | None, str]]  # (hardware id, smallest GPU count, display name)
    denied: list[tuple[str, str]]  # (hardware ids, why): cards refused for the same reason share a line
    link: str | None


class FeatureRow(BaseModel):
    name: str
    description: str | None
    excludes: list[str]  # never together with these features
    on_by_default: bool
    flags: str
    notes: list[str]


class VariantRow(BaseModel):
    name: str
    precision: str
    checkpoint: str
    published_gb: float | None
    published_is_estimate: bool
    ours_gb: int | None
    ratio: float | None
    level: str
    message: str
    warning: bool
    fit: str | None


class CommandChoice(BaseModel):
    variant: str
    hardware: str
    layout: str


class CommandView(BaseModel):
    choice: CommandChoice
    variants: list[str]
    hardware: list[tuple[str, str]]  # (id, label) the recipe does not rule out
    layouts: list[str]
    command: ServeCommand | None
    error: str | None


class SeqsRow(BaseModel):
    card: str
    name: str
    default: MaxNumSeqsDefault
    link: str | None


def hardware_rows(evidence: Evidence) -> list[HardwareRow]:
    return [HardwareRow(id=h.id, name=h.display_name, maker=h.brand, status=h.status,
                        status_words=STATUS_WORDS.get(h.status, h.status), gpus_per_node=h.gpus_per_node,
                        memory_gb_per_gpu=h.memory_gb_per_gpu, placeable=h.placeable,
                        placeable_words="yes" if h.placeable else NOT_PLACEABLE,
                        default=h.id == evidence.default_hardware)
            for h in evidence.hardware]


def layout_rows(evidence: Evidence) -> list[LayoutRow]:
    rows = []
    names = {h.id: h.display_name for h in evidence.hardware}
    for layout in evidence.layouts:
        rows.append(LayoutRow(
            name=layout.name, display_name=layout_name(layout.name), spans_nodes=layout.deploy_type in SPANS_NODES,
            default=layout.default, compatible=layout.compatible,
            words=LAYOUT_WORDS.get(layout.name, layout.deploy_type.replace("_", " ")),
            allowed=[(hw, layout.minimum_gpus.get(hw), names.get(hw, hw)) for hw in layout.allowed],
            denied=_grouped(layout.denied), link=evidence.links.strategies.get(layout.name)))
    return rows


def _grouped(denied: dict[str, str]) -> list[tuple[str, str]]:
    by_reason: dict[str, list[str]] = {}
    for hw, why in denied.items():
        by_reason.setdefault(why, []).append(hw)
    return sorted((", ".join(sorted(hws)), why) for why, hws in by_reason.items())


def feature_rows(evidence: Evidence) -> list[FeatureRow]:
    rows = []
    for f in evidence.features:
        notes = []
        if f.opt_in_on:
            notes.append(f"opt-in on {', '.join(f.opt_in_on)}")
        if f.strategies is not None:
            notes.append(f"only with the layouts {', '.join(f.strategies)}")
        for hw, args in sorted(f.hardware_overrides.items()):
            notes.append(f"on {hw} the flags are: {' '.join(args)}")
        for mode, spec in f.modes.items():
            text = f"mode {mode}{' (default)' if mode == f.default_mode else ''}: {' '.join(spec.args) or 'no flags'}"
            if spec.variants is not None:
                text += f"; variants {', '.join(spec.variants)}"
            if spec.unsupported_on:
                text += f"; not on {', '.join(spec.unsupported_on)}"
            notes.append(text)
        if f.env:
            notes.append("sets " + ", ".join(f"{k}={v}" for k, v in f.env.items()))
        rows.append(FeatureRow(name=f.name, description=feature_words(f.name),
                               excludes=sorted(set(f.excludes) | set(mutually_exclusive(f.name))),
                               on_by_default=f.default == "on", flags=flag_lines(f.args) or "(no flags)",
                               notes=notes))
    return rows


def flag_lines(args: list[str]) -> str:
    """Flags one per line, each with its value, continued as a shell would read them when pasted."""
    groups: list[list[str]] = []
    for token in args:
        if token.startswith("-") or not groups:
            groups.append([token])
        else:
            groups[-1].append(token)
    return " \\\n".join(" ".join(shlex.quote(t) for t in group) for group in groups)


def variant_rows(evidence: Evidence | None, sizing: list[VariantSizing]) -> list[VariantRow]:
    """The recipe's published floor next to the plane's own, per variant."""
    published = {v.name: v for v in evidence.variants} if evidence else {}
    rows = []
    for s in sizing:
        v = published.get(s.variant)
        floor = s.report.floor if s.report else None
        fit = s.report.fit if s.report else None
        rows.append(VariantRow(
            name=s.variant, precision=v.precision if v else "", checkpoint=s.checkpoint,
            published_gb=v.vram_minimum_gb if v else None, published_is_estimate=bool(v and v.is_estimate),
            ours_gb=floor.ours_gb if floor else None, ratio=floor.ratio if floor else None,
            level=floor.level if floor else "not_sized",
            message=floor.message if floor else (s.note or "not sized"),
            warning=bool(floor and floor.level == "warning"),
            fit=(f"{'fits' if fit.fits else 'does not fit'} on {fit.gpus} × {fit.hardware} ({fit.layout}): "
                 f"{fit.headroom_gb} GB per GPU to spare" if fit else None)))
    return rows


def published_variant_rows(evidence: Evidence) -> list[VariantRow]:
    """The floors a recipe publishes, before any artifact is sized (the public model page)."""
    return [VariantRow(name=v.name, precision=v.precision, checkpoint=v.checkpoint, published_gb=v.vram_minimum_gb,
                       published_is_estimate=v.is_estimate, ours_gb=None, ratio=None, level="published",
                       message="", warning=False, fit=None)
            for v in evidence.variants]


def default_choice(evidence: Evidence, hardware: str | None = None, layout: str | None = None) -> CommandChoice:
    """The recipe's default layout on its default (else first placeable, else first) allowed card."""
    layout = layout or evidence.default_layout or ""  # "": an omni recipe has no layout; the command view says so
    if hardware is None:
        entry = next((lay for lay in evidence.layouts if lay.name == layout), None)
        allowed = entry.allowed if entry else []
        placeable = {h.id for h in evidence.hardware if h.placeable}
        ranked = sorted(allowed, key=lambda h: (h != evidence.default_hardware, h not in placeable))
        hardware = ranked[0] if ranked else evidence.default_hardware or "h200"
    return CommandChoice(variant=evidence.default_variant, hardware=hardware, layout=layout)


def command_view(recipe: Recipe, evidence: Evidence, catalog: Catalog, choice: CommandChoice) -> CommandView:
    command, error = None, None
    try:
        command = serve_command(recipe, choice.variant, choice.hardware, choice.layout, [], catalog=catalog)
    except InvalidChoice as exc:
        error = str(exc)
    except LookupError as exc:  # an unknown hardware id in the query string
        error = str(exc).strip("'\"")
    return CommandView(choice=choice, variants=[v.name for v in evidence.variants],
                       hardware=[(h.id, _hardware_label(h)) for h in evidence.hardware if h.status != "unsupported"],
                       layouts=[lay.name for lay in evidence.layouts], command=command, error=error)


def _hardware_label(h: HardwareEvidence) -> str:
    return f"{h.display_name} ({h.gpus_per_node} GPUs per node)" if h.gpus_per_node else h.display_name


def max_num_seqs_rows(hf_id: str, evidence: Evidence, catalog: Catalog) -> list[SeqsRow]:
    """The `--max-num-seqs` a workload of this model runs with on each card the plane can place: from the
    command a workload there would run (the default variant in the default layout, else the first layout
    offered on the card), by the planner's own rule, so the page and the workload never disagree."""
    rows = []
    recipe = catalog.recipes.get(evidence.recipe)
    for h in evidence.hardware:
        if not h.placeable or h.status == "unsupported":
            continue
        default = (_applied_on(recipe, hf_id, h.id, evidence, catalog) if recipe is not None else None) \
            or max_num_seqs_default(hf_id, h.id, catalog)
        src = catalog.vllm_source if default.origin == "vllm recipe" else catalog.dynamo_source
        link = _link(src.repository, src.commit, default.source_path) if default.source_path else None
        rows.append(SeqsRow(card=h.id, name=h.display_name, default=default, link=link))
    return rows


def _applied_on(recipe: Recipe, hf_id: str, card: str, evidence: Evidence,
                catalog: Catalog) -> MaxNumSeqsDefault | None:
    layouts = sorted((lay for lay in evidence.layouts if card in lay.allowed), key=lambda lay: not lay.default)
    for layout in layouts:
        try:
            command = serve_command(recipe, evidence.default_variant, card, layout.name, [], catalog=catalog)
        except InvalidChoice:
            continue
        return max_num_seqs_applied(command, hf_id, catalog)
    return None


def dynamo_link(catalog: Catalog, source_path: str) -> str | None:
    return _link(catalog.dynamo_source.repository, catalog.dynamo_source.commit, source_path)

"""The artifact proposal: what a Hugging Face model at one commit is, as far as Wingsmith cares.
`build_proposal` is pure: Hub facts + config.json in, proposal out."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from wingsmith.domain.hub import config_facts, weights
from wingsmith.domain.hub.config_facts import Quantization
from wingsmith.domain.hub.config_schema import check_config
from wingsmith.domain.hub.weights import WeightFigure, WeightSource


class HubFile(BaseModel, frozen=True):
    path: str
    size: int | None = None


class HubFacts(BaseModel, frozen=True):
    """What `model_info(files_metadata=True)` says, reduced to plain data."""
    repo_id: str
    sha: str
    private: bool = False
    gated: Literal["auto", "manual"] | None = None
    pipeline_tag: str | None = None
    library: str | None = None
    tags: list[str] = []
    card: dict[str, Any] = {}
    files: list[HubFile] = []
    parameters: dict[str, int] | None = None
    parameters_total: int | None = None
    last_modified: datetime | None = None


class License(BaseModel, frozen=True):
    id: str | None = None
    # For `other` (and custom licences) the Hub card names the licence and links its text.
    name: str | None = None
    link: str | None = None


class WrappedModel(BaseModel, frozen=True):
    model_type: str | None = None
    architecture: str | None = None


class FilesSummary(BaseModel, frozen=True):
    count: int
    total_bytes: int | None
    weight_files: list[str]
    weight_file_count: int
    ignored_weight_files: dict[str, str] = Field(default_factory=dict, description="path → why it is not counted")
    gguf_files: int = 0
    has_index: bool = False
    has_tokenizer: bool = False
    sizes_known: bool = True


class ParameterCounts(BaseModel, frozen=True):
    total: int | None = None
    by_dtype: dict[str, int] = {}
    source: Literal["hub_safetensors", "config_estimate"] | None = None


class ArtifactProposal(BaseModel, frozen=True):
    repo_id: str
    revision: str = Field(description="the revision asked for (branch, tag or commit)")
    sha: str = Field(description="the commit the revision resolved to")
    license: License
    gated: bool
    gated_mode: Literal["auto", "manual"] | None = None
    private: bool
    pipeline_tag: str | None = None
    library: str | None = None
    model_type: str | None = None
    architecture: str | None = None
    wrapper: WrappedModel | None = Field(None,
                                         description="the multimodal wrapper, when the text model sits inside one")
    dtype: str | None = None
    quantization: Quantization | None = None
    weight_bytes: int | None
    weight_bytes_source: WeightSource | None
    weight_bytes_fallbacks: list[WeightFigure] = Field(
        default_factory=list, description="the other sources, in order of preference")
    parameters: ParameterCounts
    context_length: int | None = None
    files: FilesSummary
    last_modified: datetime | None = None
    config: dict[str, Any]
    # Filled later by joining the recipes catalog and the sizing module.
    evidence: dict | None = None
    sizing: dict | None = None


def license_of(facts: HubFacts) -> License:
    card = facts.card or {}
    lic = card.get("license")
    if isinstance(lic, list):
        lic = lic[0] if lic else None
    if lic is None:
        lic = next((t.split(":", 1)[1] for t in facts.tags if t.startswith("license:")), None)
    # The card is the model owner's free text: only strings are names (a licence written as an object is none).
    return License(id=_text(lic), name=_text(card.get("license_name")), link=_text(card.get("license_link")))


def _text(value: Any) -> str | None:
    return value[:1000] if isinstance(value, str) else None


def summarize_files(files: list[HubFile]) -> FilesSummary:
    weight, ignored = [], {}
    for f in files:
        if weights.is_weight_file(f.path):
            reason = weights.ignored_reason(f.path)
            if reason:
                ignored[f.path] = reason
            else:
                weight.append(f.path)
    sizes = [f.size for f in files]
    weight_sizes = [f.size for f in files if f.path in set(weight)]
    return FilesSummary(
        count=len(files),
        total_bytes=sum(sizes) if files and None not in sizes else None,
        weight_files=sorted(weight), weight_file_count=len(weight), ignored_weight_files=ignored,
        gguf_files=sum(1 for f in files if f.path.endswith(".gguf")),
        has_index=any(f.path == "model.safetensors.index.json" for f in files),
        has_tokenizer=any(f.path.rsplit("/", 1)[-1].startswith("tokenizer") for f in files),
        sizes_known=bool(weight) and None not in weight_sizes)


def weight_figures(facts: HubFacts, config: dict[str, Any], files: FilesSummary,
                   index_total_size: int | None) -> list[WeightFigure]:
    """Every source of the weight figure, in order of preference."""
    sizes = {f.path: f.size for f in facts.files}
    if files.sizes_known:
        first = WeightFigure(source="safetensors_files", bytes=sum(sizes[p] for p in files.weight_files),
                             note=f"sum of {files.weight_file_count} safetensors files at the commit")
    else:
        first = WeightFigure(source="safetensors_files",
                             note="no safetensors files with sizes" if not files.weight_files
                             else "the Hub gave no file sizes")
    index = WeightFigure(source="index_total_size", bytes=index_total_size,
                         note="model.safetensors.index.json metadata.total_size" if index_total_size is not None
                         else ("not needed" if first.bytes is not None else "no index, or it has no total_size"))
    quant = config_facts.quantization(config)
    return [first, index, weights.from_parameters(facts.parameters, quant),
            weights.estimate_from_config(config)]


def build_proposal(facts: HubFacts, config: dict[str, Any], *, revision: str,
                   index_total_size: int | None = None) -> ArtifactProposal:
    text = config_facts.text_config(check_config(config))
    wrapped = text is not config
    files = summarize_files(facts.files)
    figures = weight_figures(facts, config, files, index_total_size)
    chosen = next((f for f in figures if f.bytes is not None), None)
    fallbacks = [f for f in figures if f is not chosen]
    if facts.parameters_total or facts.parameters:
        params = ParameterCounts(total=facts.parameters_total or sum((facts.parameters or {}).values()),
                                 by_dtype=facts.parameters or {}, source="hub_safetensors")
    else:
        estimate = weights.estimated_parameters(config)
        params = ParameterCounts(total=estimate, source="config_estimate" if estimate else None)
    return ArtifactProposal(
        repo_id=facts.repo_id, revision=revision, sha=facts.sha, license=license_of(facts),
        gated=facts.gated is not None, gated_mode=facts.gated, private=facts.private,
        pipeline_tag=facts.pipeline_tag, library=facts.library,
        model_type=text.get("model_type"),
        architecture=config_facts.architecture(text) or config_facts.architecture(config),
        wrapper=WrappedModel(model_type=config.get("model_type"), architecture=config_facts.architecture(config))
        if wrapped else None,
        dtype=config_facts.dtype(config), quantization=config_facts.quantization(config),
        weight_bytes=chosen.bytes if chosen else None, weight_bytes_source=chosen.source if chosen else None,
        weight_bytes_fallbacks=fallbacks, parameters=params, context_length=config_facts.context_length(config),
        files=files, last_modified=facts.last_modified, config=config)

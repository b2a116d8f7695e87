"""The plane's own recipe catalog: facts taken from upstream recipe snapshots (ids, flags, env,
numbers, hardware and strategy ids, source paths), never their prose.

The shapes follow the vLLM recipe schema closely enough that command synthesis can apply
upstream's rules, but every field here is something the plane reads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Fact(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Override(_Fact):
    """Args and env that a hardware key (a generation such as `blackwell`, or a card id such as
    `gb200`) adds on top of whatever it applies to."""
    args: list[str] = []
    env: dict[str, str] = {}
    docker_image: str | None = None


class FeatureMode(_Fact):
    args: list[str] = []
    hardware_overrides: dict[str, list[str]] = {}
    variants: list[str] | None = None  # None: every variant
    hardware: dict[str, str] = {}  # card id -> "unsupported" etc.


class Feature(_Fact):
    args: list[str] = []
    # Feature-level support per card (`{rtx_5090: unsupported}`): never built into a command there.
    hardware: dict[str, str] = {}
    env: dict[str, str] = {}
    strategies: list[str] | None = None  # None: every layout
    # Upstream rule: a feature's hardware override *replaces* its args on that hardware.
    hardware_overrides: dict[str, list[str]] = {}
    modes: dict[str, FeatureMode] = {}
    default_mode: str | None = None


class Variant(_Fact):
    precision: str
    label: str | None = None
    model_id: str | None = None
    vram_minimum_gb: float
    is_estimate: bool = False
    min_vllm_version: str | None = None
    docker_image: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    hardware_overrides: dict[str, Override] = {}
    supported_hardware: list[str] | None = None
    # Widens the hardware a precision implies (NVFP4/FP4: Blackwell): {brand?, generation?}, each a
    # name or a list, e.g. NVFP4 weights vLLM dequantizes on Hopper.
    precision_hardware: dict[str, list[str]] = {}
    tp: int | dict[str, int] | None = None  # one size, or per card ({b200: 2, h200: 4})
    default_modes: dict[str, str] = {}


class PdRole(_Fact):
    parallelism: str | None = None
    tp: int | None = None
    nodes: int | dict[str, int] | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    hardware_overrides: dict[str, Override] = {}


class StrategyOverride(_Fact):
    args: list[str] = []
    env: dict[str, str] = {}
    # A key here replaces the recipe-level hardware block with the same key for this layout.
    hardware_overrides: dict[str, Override] = {}
    tp: int | dict[str, int] | None = None
    router: dict[str, int | str] = {}
    prefill: PdRole | None = None
    decode: PdRole | None = None
    # pd_cluster only: the parallelism modes (tp/tep/dep) its prefill and decode pools may take.
    pool_modes: list[str] = []


class Strategy(_Fact):
    """A parallelism layout from upstream `strategies/*.yaml`."""
    name: str
    deploy_type: Literal["single_node", "multi_node", "pd_cluster"]
    args: list[str] = []
    env: dict[str, str] = {}
    parallel_flag: str
    parallelism: str | None = None  # "tp_pp" / "tp_dp" change how sizes are emitted
    min_gpus: int = 1
    max_gpus: int | None = None
    multi_node: bool = False
    moe_only: bool = False
    prefill: PdRole | None = None
    decode: PdRole | None = None
    source_path: str


class HardwareProfile(_Fact):
    """A card from upstream `taxonomy.yaml` (the recipe's own vocabulary)."""
    id: str
    brand: str
    generation: str
    display_name: str
    gpu_count: int
    vram_gb: float
    scalable: bool = True
    restricted: bool = False


class InstallPath(_Fact):
    """One install path upstream names for a model (`docker`, `pip`): offered or not, and its command."""
    offered: bool = True  # False: upstream says `pip: false` (this path does not work for the model)
    command: str | None = None
    note: str | None = None


class Dependency(_Fact):
    """Something to install beside vLLM (vLLM-Omni, a pinned transformers), as upstream lists it."""
    command: str
    note: str | None = None
    optional: bool = False
    brand: str | None = None  # only on this vendor's cards
    install_modes: list[str] = []  # only for these install paths (pip, docker)


class OmniTaskOverride(_Fact):
    vram_minimum_gb: float | None = None
    args: list[str] = []


class OmniTask(_Fact):
    """A vLLM-Omni task (t2v, tts ...): its own floor, and a smaller one on some cards (a task-type flag
    that loads part of the pipeline, e.g. MiniMax-H3's t2va at 48 GB on 2 × RTX 4090)."""
    id: str
    # Upstream's name for this entry where several share a task id (MiniMax-H3 has two `i2v` entries).
    key: str | None = None
    label: str | None = None
    model_id: str | None = None  # the checkpoint this task loads, where upstream names one
    # The option this entry takes on each of the recipe's choice axes (LTX-2.5: stage, weights, x2v).
    axes: dict[str, str] = {}
    endpoint: str | None = None
    vram_minimum_gb: float | None = None
    args: list[str] = []
    hardware_overrides: dict[str, OmniTaskOverride] = {}


class Recipe(_Fact):
    path: str = Field(description="org/name, the recipe file's path under models/ without .yaml")
    model_id: str
    title: str
    architecture: str | None = None
    parameter_count: str | None = None
    context_length: int | None = None
    min_vllm_version: str | None = None
    tasks: list[str] = []
    hardware: dict[str, str] = {}
    default_hardware: str | None = None
    base_args: list[str] = []
    base_env: dict[str, str] = {}
    features: dict[str, Feature] = {}
    opt_in_features: list[str] = []
    hardware_opt_in_features: dict[str, list[str]] = {}
    variants: dict[str, Variant]
    compatible_strategies: list[str]
    strategy_hardware: dict[str, dict[str, str]] = {}
    # Per layout ({multi_node_dep: 16}), "default" for a bare number, and per exact card id either
    # one floor for every layout (h100: 32) or per layout (h100: {multi_node_dep: 32}).
    strategy_min_gpus: dict[str, int | dict[str, int]] = {}
    default_strategy: str | None = None
    hardware_overrides: dict[str, Override] = {}
    strategy_overrides: dict[str, StrategyOverride] = {}
    # Runtime image(s) the recipe names: {"default": image} or upstream's per-CUDA map (cu129, cu130).
    docker_images: dict[str, str] = {}
    # vLLM-Omni recipes (`task: omni`, an `omni:` block) serve through vllm-omni and have no layouts.
    omni: bool = False
    omni_tasks: list[OmniTask] = []
    # Decode context parallelism is known to work (upstream's `model.supports_dcp`).
    supports_dcp: bool | None = None
    # KV cache offloading backends (offloading_cpu, offloading_fs ...) -> verified etc.
    kv_offload_support: dict[str, str] = {}
    nightly_required: bool = False  # needs a nightly vLLM build (min_vllm_version is not released yet)
    flashinfer_autotune: bool | None = None  # upstream's `model.flashinfer_autotune`
    install: dict[str, InstallPath] = {}
    dependencies: list[Dependency] = []
    source_path: str

    @property
    def default_variant(self) -> str:
        """`default` when upstream has it; else the first variant that imported."""
        return "default" if "default" in self.variants else next(iter(self.variants))


class MaxConcurrency(_Fact):
    """The engine's concurrency cap as the Dynamo recipe sets it, or None: the engine default."""
    setting: str  # --max-num-seqs, --max-running-requests or max_batch_size
    value: int | None = None


class DynamoWorker(_Fact):
    name: str
    role: Literal["aggregated", "prefill", "decode", "encode"]
    card: str | None = None
    card_label: str | None = None
    gpus: int | None = None
    nodes: int = 1
    replicas: int = 1
    tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_concurrency: MaxConcurrency


class DynamoEntry(_Fact):
    source_path: str
    model: str = Field(description="the model directory under recipes/")
    model_ids: list[str] = Field(description="HF ids the workers load or serve as")
    model_name: str = Field(default="", description="the name the entry serves its model as")
    model_name_source: str = Field(default="recipe folder", description="where model_name came from: a flag "
                                   "(--served-model-name first, then --model, --model-path), an env var, or the "
                                   "recipe folder")
    loaded_model: str | None = Field(default=None, description="the checkpoint the workers load, when it is not "
                                     "the served name (e.g. nvidia/Kimi-K2.6-NVFP4 served as moonshotai/Kimi-K2.6)")
    backend: Literal["vllm", "sglang", "trtllm"]
    mode: Literal["aggregated", "disaggregated"]
    card: str | None = Field(description="hardware id (wingsmith.domain.hardware) or None if not stated")
    card_label: str | None = None
    card_source: Literal["node selector", "resource claim", "directory name"] | None = None
    # A directory or node label that names the card's generation only (`deploy_hopper_16gpu.yaml`,
    # `nvidia.com/gpu.family: blackwell`): the family, and the placeable cards of it the entry may run on.
    card_family: str | None = None
    family_cards: list[str] = []
    gpus_per_worker: int | None = None
    nodes: int = 1
    replicas: int = 1
    tensor_parallel_size: int | None = None
    max_concurrency: MaxConcurrency
    workers: list[DynamoWorker]


class SourceStamp(_Fact):
    repository: str | None = None
    commit: str | None = None


class Catalog(_Fact):
    version: str
    vllm_source: SourceStamp
    dynamo_source: SourceStamp
    recipes: dict[str, Recipe]
    strategies: dict[str, Strategy]
    hardware: dict[str, HardwareProfile]
    dynamo: list[DynamoEntry]

    def find(self, hf_id: str, precision: str | None = None) -> RecipeMatch | None:
        from wingsmith.domain.recipes.catalog import find_recipe
        return find_recipe(self, hf_id, precision)


class RecipeMatch(_Fact):
    recipe: Recipe
    variant: str = Field(description="the variant whose checkpoint the id names ('default' for the recipe path)")
    matched_by: Literal["recipe path", "variant model_id", "variant precision"]

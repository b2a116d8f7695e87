"""The `vllm serve` command a recipe implies for one choice of variant, hardware, layout and
features, synthesised by upstream's rules:

base args → variant args → layout args with its parallel flag and size → the recipe's strategy
override args → hardware block (card id, else generation; a strategy override's block with the
same key replaces the recipe's) → variant hardware block → features (a feature's hardware
override replaces its args) → last-wins de-duplication of `--flag value` pairs. Env merges in the
same order. Multi-node layouts get one command per node."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from wingsmith.domain.dynamo.ranks import ranks_problem
from wingsmith.domain.dynamo.rollout_spec import Engine
from wingsmith.domain.recipes.models import (
    Catalog,
    Feature,
    HardwareProfile,
    Override,
    PdRole,
    Recipe,
    RecipeMatch,
    Strategy,
    StrategyOverride,
    Variant,
)
from wingsmith.domain.recipes.pd_pools import PdPool, pd_pool
from wingsmith.domain.recipes.rules import (
    DP_FLAGS,
    BelowFloor,
    InvalidChoice,
    args_size,
    args_tp,
    exclusions,
    feature_gated,
    feature_unsupported,
    hardware_status,
    is_opt_in,
    layout_allowed,
    minimum_gpus,
    pick,
    pinned_for_every_card,
    pinned_tp,
    precision_problem,
    profile_for,
    shape_gb,
    unsupported_on,
    without_sizes,
)

HEAD_ADDRESS = "$HEAD_NODE_IP"


class NodeCommand(BaseModel, frozen=True):
    role: str  # "serve", "prefill" or "decode"
    node_rank: int
    gpus: int  # GPUs this node's pod reserves: its ranks on this node (wingsmith.domain.dynamo.ranks checks them)
    args: list[str]
    env: dict[str, str]
    argv: list[str]


class ServeCommand(BaseModel, frozen=True):
    recipe: str
    model: str
    variant: str
    hardware: str
    hardware_status: str
    layout: str
    features: dict[str, str | None]  # enabled feature -> mode (None when it has no modes)
    gpus: int
    nodes: int
    gpus_per_node: int
    tensor_parallel_size: int
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    args: list[str]
    env: dict[str, str]
    commands: list[NodeCommand]
    docker_image: str | None = None
    notes: list[str] = []
    shape_reason: str = ""  # why this GPU count: asked for, pinned by the recipe, or the smallest that holds
    pin: str | None = None  # the recipe's pin the shape keeps, in words naming it

    @property
    def argv(self) -> list[str]:
        return ["vllm", "serve", self.model, *self.args]


def _flag_key(token: str) -> str:
    name = token.split("=", 1)[0]
    # `--no-x` and `--x` set the same switch; the later one wins.
    return "--" + name[5:] if name.startswith("--no-") else name


def dedupe_args(args: list[str]) -> list[str]:
    """Last wins per flag; a flag keeps the position where it first appeared."""
    groups: list[tuple[str | None, list[str]]] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token.startswith("--"):
            if "=" not in token and i + 1 < len(args) and not args[i + 1].startswith("--"):
                groups.append((_flag_key(token), [token, args[i + 1]]))
                i += 2
                continue
            groups.append((_flag_key(token), [token]))
        else:
            groups.append((None, [token]))
        i += 1
    last = {key: tokens for key, tokens in groups if key}
    out, seen = [], set()
    for key, tokens in groups:
        if key is None:
            out.extend(tokens)
        elif key not in seen:
            seen.add(key)
            out.extend(last[key])
    return out


def _merge_env(*envs: dict[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for env in envs:
        merged.update(env)
    return merged


def _hardware_blocks(recipe: Recipe, so: StrategyOverride | None, variant: Variant,
                     profile: HardwareProfile) -> list[Override]:
    rec_key, rec_block = pick(recipe.hardware_overrides, profile)
    so_key, so_block = pick(so.hardware_overrides, profile) if so else (None, None)
    if so_block is not None and so_key == rec_key:
        blocks = [so_block]  # upstream: the strategy's block replaces the recipe block it shadows
    else:
        blocks = [b for b in (rec_block, so_block) if b is not None]
    _, var_block = pick(variant.hardware_overrides, profile)
    if var_block is not None:
        blocks.append(var_block)
    return blocks


def _requested(recipe: Recipe, requested: list[str]) -> tuple[dict[str, str | None], set[str]]:
    """`name` / `name:mode` to enable, `-name` to switch off: (enabled with their modes, disabled)."""
    explicit: dict[str, str | None] = {}
    disabled: set[str] = set()
    for item in requested:
        name, _, mode = item.lstrip("-").partition(":")
        if name not in recipe.features:
            has = ", ".join(recipe.features) or "none"
            raise InvalidChoice(f"{recipe.path} has no feature {name!r}; it has: {has}")
        if item.startswith("-"):
            disabled.add(name)
        else:
            explicit[name] = mode or None
    return explicit, disabled


def _unavailable(name: str, feature: Feature, profile: HardwareProfile, layout: str) -> str | None:
    """Why a feature cannot be built with this layout or on this card, if it cannot."""
    if feature_gated(feature, layout):
        return f"feature {name} is not available with layout {layout} (only {', '.join(feature.strategies or [])})"
    if feature_unsupported(feature, profile):
        return f"feature {name} is unsupported on {profile.id}"
    return None


def _mode(name: str, feature: Feature, asked: str | None, variant_name: str, variant: Variant,
          profile: HardwareProfile) -> tuple[str | None, str | None]:
    """(the mode to build, or why this variant or card rules the feature's mode out)."""
    if not feature.modes:
        if asked:
            raise InvalidChoice(f"feature {name} has no modes")
        return None, None
    mode = asked or variant.default_modes.get(name) or feature.default_mode or next(iter(feature.modes))
    if mode not in feature.modes:
        raise InvalidChoice(f"feature {name} has no mode {mode!r}; modes: {', '.join(feature.modes)}")
    spec = feature.modes[mode]
    if spec.variants is not None and variant_name not in spec.variants:
        return mode, f"mode {mode} of {name} needs variant {' or '.join(spec.variants)}"
    if unsupported_on(spec.hardware, profile):
        return mode, f"mode {mode} of {name} is unsupported on {profile.id}"
    return mode, None


def _choose_features(recipe: Recipe, variant_name: str, variant: Variant, profile: HardwareProfile,
                     layout: str, requested: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """The features to build and their modes: asked-for ones must be buildable (else InvalidChoice);
    default ones that are not are left off with a note."""
    notes: list[str] = []
    explicit, disabled = _requested(recipe, requested)
    chosen: dict[str, str | None] = {}
    for name, feature in recipe.features.items():
        wanted = name in explicit
        if name in disabled or (not wanted and is_opt_in(recipe, name, profile.id)):
            continue
        problem = _unavailable(name, feature, profile, layout)
        mode = None
        if problem is None:
            mode, problem = _mode(name, feature, explicit.get(name), variant_name, variant, profile)
        if problem:
            if wanted:
                raise InvalidChoice(problem)
            if not feature_gated(feature, layout):  # a layout gate is by design, not worth a note
                notes.append(f"{name} left off: {problem.removeprefix(f'feature {name} is ')}")
            continue
        chosen[name] = mode
    for a, b in exclusions(recipe):
        if a in chosen and b in chosen:
            if a in explicit and b in explicit:
                raise InvalidChoice(f"features {a} and {b} exclude each other")
            dropped = b if a in explicit else a
            notes.append(f"{dropped} switched off: it excludes {a if dropped == b else b}")
            chosen.pop(dropped)
    return chosen, notes


def _feature_parts(recipe: Recipe, chosen: dict[str, str | None], profile: HardwareProfile) -> tuple[list[str], dict]:
    args: list[str] = []
    env: dict[str, str] = {}
    for name, mode in chosen.items():
        feature = recipe.features[name]
        if mode is not None:
            spec = feature.modes[mode]
            _, override = pick(spec.hardware_overrides, profile)
            args += override if override is not None else spec.args
        else:
            _, override = pick(feature.hardware_overrides, profile)
            args += override if override is not None else feature.args
        env.update(feature.env)
    return args, env


def recipe_image(recipe: Recipe, profile: HardwareProfile) -> str | None:
    """The recipe's own runtime image for a card: upstream keys its map by card, generation or brand
    (`nvidia`/`amd`) or by CUDA build (`cu129`/`cu130`). The most specific hardware key wins, then a
    single image, then the newest CUDA build (on NVIDIA cards only)."""
    images = recipe.docker_images
    if not images:
        return None
    _, image = pick(images, profile)
    if image is not None:
        return image
    if "default" in images:
        return images["default"]
    cuda = sorted(k for k in images if k.startswith("cu"))
    return images[cuda[-1]] if cuda and profile.brand.lower() == "nvidia" else None


class _Parts:
    """What every deployment type builds its commands from: the merged args and env of the recipe,
    variant, layout, hardware and features, in upstream's order."""

    def __init__(self, recipe: Recipe, variant: str, var: Variant, profile: HardwareProfile, strategy: Strategy,
                 so: StrategyOverride | None, status: str, chosen: dict[str, str | None], notes: list[str]):
        hw_blocks = _hardware_blocks(recipe, so, var, profile)
        self.feat_args, self.feat_env = _feature_parts(recipe, chosen, profile)
        # The layout's sizes are decided once (the pins read the tail before this) and stated once: a size
        # left in the base or override args beside them would change the ranks the command asks for.
        self.head = without_sizes(recipe.base_args + var.args + strategy.args)
        self.head_env = _merge_env(recipe.base_env, var.env, strategy.env)
        self.tail_with_sizes = (so.args if so else []) + [a for b in hw_blocks for a in b.args]
        self.tail = without_sizes(self.tail_with_sizes)
        self.tail_env = _merge_env(so.env if so else {}, *(b.env for b in hw_blocks))
        self.model = var.model_id or recipe.model_id
        image = next((b.docker_image for b in reversed(hw_blocks) if b.docker_image), var.docker_image)
        self.common: dict[str, Any] = dict(recipe=recipe.path, model=self.model, variant=variant, hardware=profile.id,
                           hardware_status=status, layout=strategy.name, features=chosen,
                           gpus_per_node=profile.gpu_count, docker_image=image or recipe_image(recipe, profile),
                           notes=notes)

    def build(self, role: str, rank: int, gpus: int, sizes: list[str], role_args: list[str], role_env: dict,
              node_args: list[str]) -> NodeCommand:
        args = dedupe_args(self.head + sizes + self.tail + role_args + self.feat_args + node_args)
        env = _merge_env(self.head_env, self.tail_env, role_env, self.feat_env)
        return NodeCommand(role=role, node_rank=rank, gpus=gpus, args=args, env=env,
                           argv=["vllm", "serve", self.model, *args])


def serve_command(recipe: Recipe | RecipeMatch, variant: str, hardware: str, layout: str,
                  features: list[str] | tuple[str, ...] = (), *, gpus: int | None = None,
                  catalog: Catalog) -> ServeCommand:
    """`features` names features to enable (`name` or `name:mode`); `-name` turns off one that is on
    by default. `gpus` defaults to the smallest shape that keeps the recipe's pins: the size it pins for
    the layout, variant or card, else (one node) the fewest GPUs, a divisor of the node's, that hold the
    variant's published floor (a whole node when none does), else (multi-node) the fewest whole nodes
    the layout takes that hold it. Every command's ranks equal the GPUs it reserves
    (wingsmith.domain.dynamo.ranks), or it is refused."""
    if isinstance(recipe, RecipeMatch):
        recipe = recipe.recipe
    var = recipe.variants.get(variant)
    if var is None:
        raise InvalidChoice(f"{recipe.path} has no variant {variant!r}; variants: {', '.join(recipe.variants)}")
    profile = profile_for(catalog, hardware)
    status = hardware_status(recipe, profile.id)
    if status == "unsupported":
        raise InvalidChoice(f"{recipe.path} is marked unsupported on {profile.id}")
    if var.supported_hardware is not None and profile.id not in var.supported_hardware:
        raise InvalidChoice(f"variant {variant} runs only on {', '.join(var.supported_hardware)}")
    if problem := precision_problem(var, profile):
        raise InvalidChoice(f"variant {variant}: {problem}")
    strategy = catalog.strategies.get(layout)
    if strategy is None:
        raise InvalidChoice(f"unknown layout {layout!r}; layouts: {', '.join(catalog.strategies)}")
    allowed, reason = layout_allowed(recipe, strategy, profile.id, profile)
    if not allowed:
        raise InvalidChoice(reason)
    chosen, notes = _choose_features(recipe, variant, var, profile, layout, list(features))
    so = recipe.strategy_overrides.get(layout)
    floor = minimum_gpus(recipe, strategy, profile.id, profile)
    parts = _Parts(recipe, variant, var, profile, strategy, so, status, chosen, notes)
    if strategy.deploy_type == "pd_cluster":
        return _pd_command(recipe, strategy, so, profile, floor, parts, gpus)
    pins = _Pins(recipe, layout, profile, variant, var, strategy, parts)
    if strategy.deploy_type == "single_node":
        return _single_node_command(strategy, profile, floor, pins, parts, gpus, var.vram_minimum_gb)
    return _multi_node_command(strategy, profile, floor, pins, parts, gpus, var.vram_minimum_gb)


def offered_command(recipe: Recipe | RecipeMatch, variant: str, hardware: str, layout: str,
                    features: list[str] | tuple[str, ...] = (), *, catalog: Catalog) -> ServeCommand:
    """`serve_command` at the recipe's own shape, as the plane offers it (evidence, drafts, model pages):
    refused with BelowFloor when a one-node shape's GPUs hold less than the variant's published floor for
    one replica. A count asked for explicitly is left to the plane's fit check instead."""
    if isinstance(recipe, RecipeMatch):
        recipe = recipe.recipe
    command = serve_command(recipe, variant, hardware, layout, features, catalog=catalog)
    if command.nodes == 1 and command.layout != "pd_cluster":
        floor_gb = recipe.variants[variant].vram_minimum_gb
        held = shape_gb(profile_for(catalog, hardware), command.gpus)
        if held < floor_gb:
            pinned = f" ({command.pin})" if command.pin else ""
            raise BelowFloor(f"variant {variant} needs {floor_gb:g} GB for one replica (the recipe's floor) and "
                             f"{command.gpus} × {command.hardware}{pinned} hold {held:,.0f} GB: below its floor",
                             pin=command.pin)
    return command


class _Pins:
    """The sizes the recipe fixes for a layout on a card, each with the words that name it.

    TP: a `--tensor-parallel-size` in the strategy override's or a hardware block's args (those come after
    the layout's sizes upstream and win), else the strategy override's `tp` (per card or for all), else the
    variant's `tp`, else (single-node layouts only) a `--tensor-parallel-size` in the variant's own args. DP:
    a `--data-parallel-size` in those override args. A size in the model's base args, or in a variant's args
    on a multi-node layout, is upstream's single-node default, not a pin: the layout's sizes replace it."""

    def __init__(self, recipe: Recipe, layout: str, profile: HardwareProfile, variant: str, var: Variant,
                 strategy: Strategy, parts: _Parts):
        tail_tp, tail_dp = args_tp(parts.tail_with_sizes), args_size(parts.tail_with_sizes, DP_FLAGS)
        self.tp: int | None = tail_tp
        self.tp_words = f"the recipe sets --tensor-parallel-size {tail_tp} on {profile.id}"
        self.from_override = tail_tp is not None
        self.every_card = False
        if tail_tp is None:
            so = recipe.strategy_overrides.get(layout)
            # A variant's args TP is the size upstream tested one-node tensor parallelism at: a pin there only.
            tp_args_pin = strategy.deploy_type == "single_node" and strategy.parallel_flag == "--tensor-parallel-size"
            field = pinned_tp(recipe, layout, profile, var if tp_args_pin else var.model_copy(update={"args": []}))
            self.tp = field
            self.every_card = field is not None and pinned_for_every_card(recipe, layout, profile, var)
            if so is not None and so.tp is not None and field is not None:
                self.tp_words = f"the recipe's {layout} override pins tp: {field}"
            elif var.tp is not None:
                self.tp_words = f"variant {variant} pins tp: {field}"
            else:
                self.tp_words = f"variant {variant}'s args set --tensor-parallel-size {field}"
        self.dp = tail_dp
        self.dp_words = f"the recipe sets --data-parallel-size {tail_dp} on {profile.id}"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _smallest_holding(profile: HardwareProfile, counts: list[int], floor_gb: float) -> int | None:
    """The smallest of `counts` whose GPUs hold the variant's published floor for one replica."""
    if not profile.vram_gb:
        return None
    return next((n for n in sorted(counts) if shape_gb(profile, n) >= floor_gb), None)


def _single_node_command(strategy: Strategy, profile: HardwareProfile, floor: int, pins: _Pins,
                         parts: _Parts, gpus: int | None, replica_floor_gb: float) -> ServeCommand:
    gpn, layout, card = profile.gpu_count, strategy.name, profile.id
    data_parallel = strategy.parallel_flag == "--data-parallel-size"
    if floor > gpn:
        raise InvalidChoice(f"{layout} needs at least {floor} GPUs and a {card} node has {gpn}")
    tp_pin = pins.tp
    if tp_pin and tp_pin > gpn:
        if not pins.every_card:
            raise InvalidChoice(f"{pins.tp_words} and a {card} node has {gpn} GPUs")
        # One size written for every card (upstream's usual 8-GPU nodes): a smaller node runs whole.
        parts.common["notes"] = [*parts.common["notes"], f"the recipe's TP {tp_pin} is for larger nodes: "
                                 f"a {card} node runs it on its {gpn} GPU(s)"]
        tp_pin = gpn
    if (tp_pin and pins.every_card and not gpus and not pins.dp and profile.vram_gb
            and shape_gb(profile, tp_pin) < replica_floor_gb):
        # One size written for every card, below this card's floor (a single chip too small for the weights):
        # upstream's guide runs such a card on one host at a larger TP, so the pin yields to the smallest
        # one-node shape that holds the floor, saying so, rather than to a multi-node layout.
        parts.common["notes"] = [*parts.common["notes"], f"the recipe's TP {tp_pin} for every card holds "
                                 f"{shape_gb(profile, tp_pin):,.0f} GB on {card}, below the variant's floor of "
                                 f"{replica_floor_gb:g} GB: the smallest {card} shape that holds it instead"]
        tp_pin = None
    # The size each rank group takes and the size the layout's own flag spreads over the node.
    step = (tp_pin or 1) if data_parallel else (pins.dp or 1)
    own_pin = pins.dp if data_parallel else tp_pin
    own_words = pins.dp_words if data_parallel else pins.tp_words
    pin_words = None
    if own_pin is not None:
        fixed = own_pin * step
        pin_words = own_words
        if gpus and gpus != fixed and (pins.from_override or data_parallel or pins.dp):
            raise InvalidChoice(f"{own_words}, asked for {gpus} GPUs")
        count = gpus or fixed
        why = f"asked for {gpus} GPUs" if gpus else f"{own_words}: {fixed} GPU(s)"
    elif gpus:
        count, why = gpus, f"asked for {gpus} GPUs"
    else:
        counts = [n for n in _divisors(gpn) if n >= floor and n % step == 0]
        held = _smallest_holding(profile, counts, replica_floor_gb)
        if held is not None:
            count = held
            why = (f"the smallest shape on {card} that holds the variant's floor of {replica_floor_gb:g} GB: "
                   f"{held} GPU(s) ({shape_gb(profile, held):,.0f} GB)")
        else:
            count = max(counts) if counts else gpn
            why = f"one whole {card} node: no smaller shape holds the variant's floor of {replica_floor_gb:g} GB"
        if floor > 1 and count == floor:
            why += f" (the layout's floor on {card} is {floor} GPUs)"
    if count > gpn:
        raise InvalidChoice(f"{layout} runs on one node: at most {gpn} GPUs on {card}, asked for {count}")
    if count < floor:
        raise InvalidChoice(f"{layout} needs at least {floor} GPUs on {card}, asked for {count}")
    if count % step:
        raise InvalidChoice(f"{own_words if data_parallel else pins.dp_words} on {card}: {count} GPUs do not "
                            f"split into groups of {step}")
    tp, dp = (step, count // step) if data_parallel else (count // step, step)
    sizes = _size_flags(tp, 1, dp, None, tp_flag=not data_parallel or tp > 1)
    cmd = _checked(parts.build("serve", 0, count, sizes, [], {}, []), layout, card, count, 1)
    return ServeCommand(**parts.common, gpus=count, nodes=1, tensor_parallel_size=tp, data_parallel_size=dp,
                        args=cmd.args, env=cmd.env, commands=[cmd], shape_reason=why, pin=pin_words)


def _size_flags(tp: int, pp: int, dp: int, dp_local: int | None, *, tp_flag: bool = True) -> list[str]:
    """The layout's size flags: TP (left out where it is 1 on a data-parallel layout), PP and DP past 1."""
    out = ["--tensor-parallel-size", str(tp)] if tp_flag else []
    if pp > 1:
        out += ["--pipeline-parallel-size", str(pp)]
    if dp > 1 or dp_local is not None:
        out += ["--data-parallel-size", str(dp)]
    if dp_local is not None:
        out += ["--data-parallel-size-local", str(dp_local)]
    return out


def _checked(command: NodeCommand, layout: str, card: str, gpus_per_node: int, nodes: int) -> NodeCommand:
    """The command, once its ranks are seen to equal the GPUs its worker reserves (wingsmith.domain.dynamo.ranks)."""
    if problem := ranks_problem(Engine.vllm, command.args, gpus_per_node=gpus_per_node, nodes=nodes):
        raise InvalidChoice(f"{layout} on {card}: {problem}")
    return command


def _multi_node_sizes(strategy: Strategy, count: int, gpn: int, pins: _Pins,
                      card: str) -> tuple[int, int, int, int | None]:
    """(tp, pp, dp, data-parallel ranks per node) of a multi-node layout over `count` GPUs, keeping the
    recipe's pins or refusing the shape with the pin's words."""
    nodes, layout = count // gpn, strategy.name
    data_parallel = strategy.parallelism == "tp_dp" or strategy.parallel_flag == "--data-parallel-size"
    if data_parallel:
        tp = pins.tp or (gpn if strategy.parallelism == "tp_dp" else 1)
        if gpn % tp:
            raise InvalidChoice(f"{pins.tp_words}, which does not divide the {gpn} GPUs of a {card} node: "
                                f"{layout} runs whole data-parallel ranks on each node")
        dp = count // tp
        if pins.dp and pins.dp != dp:
            raise InvalidChoice(f"{pins.dp_words} and {layout} runs {dp} data-parallel ranks of TP {tp} "
                                f"on {count} GPUs")
        return tp, 1, dp, gpn // tp
    if pins.dp:
        raise InvalidChoice(f"{pins.dp_words} and {layout} runs no data-parallel ranks")
    if strategy.parallelism == "tp_pp":
        if pins.tp and pins.tp != gpn:
            raise InvalidChoice(f"{pins.tp_words} and {layout} runs TP {gpn} (a {card} node) per pipeline stage")
        return gpn, nodes, 1, None
    if pins.tp and pins.tp != count:
        raise InvalidChoice(f"{pins.tp_words} and {layout} on {count} × {card} runs TP {count}")
    return count, 1, 1, None


def _multi_node_command(strategy: Strategy, profile: HardwareProfile, floor: int, pins: _Pins, parts: _Parts,
                        gpus: int | None, replica_floor_gb: float) -> ServeCommand:
    gpn, layout = profile.gpu_count, strategy.name
    if not profile.scalable:
        raise InvalidChoice(f"{profile.id} cannot be joined into a multi-node deployment")
    # The recipe's shape: two nodes at least, more when its GPU floor or the variant's memory floor asks.
    nodes_for_memory = math.ceil(replica_floor_gb / shape_gb(profile, gpn)) if profile.vram_gb else 0
    count = gpus or max(-(-floor // gpn) * gpn, 2 * gpn, nodes_for_memory * gpn)
    if count < floor:
        raise InvalidChoice(f"{layout} needs at least {floor} GPUs on {profile.id}, asked for {count}")
    if count % gpn:
        raise InvalidChoice(f"{layout} uses whole nodes: {count} GPUs is not a multiple of {gpn} per {profile.id} node")
    nodes = count // gpn
    why = (f"asked for {gpus} GPUs" if gpus else
           f"the fewest whole {profile.id} nodes the layout takes (two at least) that hold the variant's floor of "
           f"{replica_floor_gb:g} GB and the recipe's GPU floor of {floor}: {nodes} node(s)")
    tp, pp, dp, local = _multi_node_sizes(strategy, count, gpn, pins, profile.id)
    sizes = _size_flags(tp, pp, dp, local, tp_flag=strategy.parallel_flag != "--data-parallel-size" or tp > 1)
    commands = []
    for rank in range(nodes):
        if dp > 1:
            node = ["--data-parallel-start-rank", str(rank * (local or 1)), "--data-parallel-address", HEAD_ADDRESS]
        else:
            node = ["--nnodes", str(nodes), "--node-rank", str(rank), "--master-addr", HEAD_ADDRESS]
        if rank:
            node.append("--headless")
        commands.append(_checked(parts.build("serve", rank, gpn, sizes, [], {}, node), layout, profile.id, gpn, nodes))
    shared = parts.build("serve", 0, gpn, sizes, [], {}, [])
    pinned = pins.tp_words if pins.tp else pins.dp_words if pins.dp else None
    return ServeCommand(**parts.common, gpus=count, nodes=nodes, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                        data_parallel_size=dp, args=shared.args, env=shared.env, commands=commands,
                        shape_reason=why, pin=pinned)


def _pd_command(recipe: Recipe, strategy: Strategy, so: StrategyOverride | None, profile: HardwareProfile,
                floor: int, parts: _Parts, gpus: int | None) -> ServeCommand:
    if not profile.scalable:
        raise InvalidChoice(f"{profile.id} cannot be joined into a prefill/decode cluster")
    pools: list[PdPool] = []
    commands: list[NodeCommand] = []
    for role in ("prefill", "decode"):
        pool = pd_pool(role, getattr(strategy, role) or PdRole(), (getattr(so, role) if so else None) or PdRole(),
                       profile)
        pools.append(pool)
        for rank in range(pool.nodes):
            node = parts.build(role, rank, pool.pod_gpus, pool.size_flags(), pool.args, pool.node_env(rank),
                               pool.node_flags(rank))
            commands.append(_checked(node, f"pd_cluster's {role} pool", profile.id, pool.pod_gpus, pool.nodes))
    total = sum(pool.gpus for pool in pools)
    if gpus is not None and gpus != total:
        raise InvalidChoice(f"pd_cluster's prefill and decode pools take {total} GPUs on {profile.id}, not {gpus}")
    if total < floor:
        raise InvalidChoice(f"pd_cluster needs at least {floor} GPUs on {profile.id}; its pools take {total}")
    first, (decode_tp, decode_dp) = commands[0], pools[-1].tp_dp
    return ServeCommand(**parts.common, gpus=total, nodes=sum(pool.nodes for pool in pools),
                        tensor_parallel_size=decode_tp, data_parallel_size=decode_dp, args=first.args,
                        env=first.env, commands=commands,
                        shape_reason="the recipe's prefill and decode pools, as its pd_cluster strategy sizes them")

"""Parse a vLLM recipes snapshot (`models/<org>/<repo>.yaml`, `strategies/*.yaml`, `taxonomy.yaml`)
into catalog facts. Descriptions, guides and notes are dropped: only flags, env, numbers and ids
carry over. Pure: the snapshot comes in as texts (problems.Snapshot); wingsmith/adapters/recipes/files.py reads
it from a directory and wingsmith/adapters/recipes/refresh.py fetches it."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import yaml
from pydantic import ValidationError

from wingsmith.domain.recipes.known_fields import unknown_fields
from wingsmith.domain.recipes.models import (
    Dependency,
    Feature,
    FeatureMode,
    HardwareProfile,
    InstallPath,
    OmniTask,
    OmniTaskOverride,
    Override,
    PdRole,
    Recipe,
    Strategy,
    StrategyOverride,
    Variant,
)
from wingsmith.domain.recipes.problems import (
    BadField,
    ImportProblem,
    PartProblems,
    Snapshot,
    Unreadable,
    from_validation_error,
    items,
    mapping,
    path_order,
    str_list,
    str_map,
)
from wingsmith.domain.recipes.rules import HARDWARE_STATUSES

# libyaml's parser when PyYAML has it (same documents, ~10x faster than the pure-Python one: upstream
# has well over a hundred recipe files, and the importer should stay quick).
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# The files of a snapshot the importer reads (paths relative to the repository's root).
RECIPE_FILES = re.compile(r"models/[^/]+/[^/]+\.yaml")
STRATEGY_FILES = re.compile(r"strategies/[^/]+\.yaml")
TAXONOMY = "taxonomy.yaml"
FILES = re.compile(rf"{RECIPE_FILES.pattern}|{STRATEGY_FILES.pattern}|{re.escape(TAXONOMY)}")
GLOBS = (TAXONOMY, "strategies/*.yaml", "models/*/*.yaml")  # the same files, for reading a directory


def parse_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """The document and its node tree (with line marks), parsed once. Raises BadField naming the
    line when the text is not YAML."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(document)"
        raise BadField(where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    finally:
        loader.dispose()


def _load_yaml(text: str) -> Any:
    return parse_yaml(text)[0]


def _override(value: Any, field: str) -> Override:
    block = mapping(value, field)
    return Override(args=str_list(block.get("extra_args", block.get("args")), f"{field}.extra_args"),
                    env=str_map(block.get("extra_env", block.get("env")), f"{field}.extra_env"),
                    docker_image=block.get("docker_image"))


def _overrides(value: Any, field: str) -> dict[str, Override]:
    return {str(k): _override(v, f"{field}.{k}") for k, v in mapping(value, field).items()}


def _arg_overrides(value: Any, field: str) -> dict[str, list[str]]:
    return {str(k): str_list(mapping(v, f"{field}.{k}").get("args"), f"{field}.{k}.args")
            for k, v in mapping(value, field).items()}


def _feature(value: Any, field: str) -> Feature:
    block = mapping(value, field, required=True)
    modes = {}
    for name, mode in mapping(block.get("modes"), f"{field}.modes").items():
        m = mapping(mode, f"{field}.modes.{name}", required=True)
        modes[str(name)] = FeatureMode(
            args=str_list(m.get("args"), f"{field}.modes.{name}.args"),
            hardware_overrides=_arg_overrides(m.get("hardware_overrides"), f"{field}.modes.{name}.hardware_overrides"),
            variants=str_list(m["variants"], f"{field}.modes.{name}.variants") if "variants" in m else None,
            hardware=str_map(m.get("hardware"), f"{field}.modes.{name}.hardware"))
    hw_args = _arg_overrides(block.get("hardware_overrides"), f"{field}.hardware_overrides")
    # A feature may carry its args only per vendor (hardware_overrides.nvidia/amd): on other cards
    # it adds nothing.
    if not modes and "args" not in block and not hw_args:
        raise BadField(f"{field}.args", "missing (a feature needs args, hardware_overrides args or modes)")
    default_mode = block.get("default_mode")
    if default_mode is not None and default_mode not in modes:
        raise BadField(f"{field}.default_mode", f"{default_mode!r} is not one of its modes")
    return Feature(args=str_list(block.get("args"), f"{field}.args"),
                   env=str_map(block.get("env"), f"{field}.env"),
                   hardware=str_map(block.get("hardware"), f"{field}.hardware"),
                   strategies=str_list(block["strategies"], f"{field}.strategies") if "strategies" in block else None,
                   hardware_overrides=hw_args, modes=modes, default_mode=default_mode)


def _tp(value: Any, field: str) -> int | dict[str, int] | None:
    """A tensor-parallel size: one whole number, or a per-card map ({b200: 2, h200: 4})."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {str(k): _positive(v, f"{field}.{k}") for k, v in value.items()}
    return _positive(value, field)


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadField(field, f"expected a positive whole number, got {value!r}")
    return value


def _estimate_flags(text: str, root: yaml.Node | None) -> dict[str, bool]:
    """Which variants upstream marks as an estimate. Upstream says so only in a YAML comment or the
    variant's description, so look at the comment lines right above `vram_minimum_gb` (`root` is
    the text's node tree)."""
    lines = text.splitlines()
    flags: dict[str, bool] = {}
    if not isinstance(root, yaml.MappingNode):
        return flags
    for key, node in root.value:
        if key.value != "variants" or not isinstance(node, yaml.MappingNode):
            continue
        for vkey, vnode in node.value:
            if not isinstance(vnode, yaml.MappingNode):
                continue
            for fkey, _ in vnode.value:
                if fkey.value != "vram_minimum_gb":
                    continue
                i, comments = fkey.start_mark.line - 1, []
                while i >= 0 and lines[i].strip().startswith("#"):
                    comments.append(lines[i])
                    i -= 1
                flags[vkey.value] = "estimat" in " ".join(comments).lower()
    return flags


def _variant(name: str, value: Any, field: str, estimate_comment: bool) -> Variant:
    block = mapping(value, field, required=True)
    floor = block.get("vram_minimum_gb")
    if isinstance(floor, bool) or not isinstance(floor, (int, float)):
        raise BadField(f"{field}.vram_minimum_gb",
                       "missing" if floor is None else f"expected a number of GB, got {floor!r}")
    if "precision" not in block:
        raise BadField(f"{field}.precision", "missing")
    description = str(block.get("description") or "").lower()
    return Variant(
        precision=str(block["precision"]), label=block.get("label"), model_id=block.get("model_id"),
        vram_minimum_gb=floor, is_estimate=estimate_comment or "estimat" in description,
        min_vllm_version=block.get("min_vllm_version"), docker_image=block.get("docker_image"),
        args=str_list(block.get("extra_args"), f"{field}.extra_args"),
        env=str_map(block.get("extra_env"), f"{field}.extra_env"),
        hardware_overrides=_overrides(block.get("hardware_overrides"), f"{field}.hardware_overrides"),
        supported_hardware=str_list(block["supported_hardware"], f"{field}.supported_hardware")
        if "supported_hardware" in block else None,
        tp=_tp(block.get("tp"), f"{field}.tp"),
        precision_hardware=_precision_hardware(block.get("precision_hardware"), f"{field}.precision_hardware"),
        default_modes=str_map(block.get("default_modes"), f"{field}.default_modes"))


def _pd_role(value: Any, field: str) -> PdRole | None:
    if value is None:
        return None
    block = mapping(value, field)
    return PdRole(parallelism=block.get("parallelism"), tp=block.get("tp"), nodes=block.get("nodes"),
                  args=str_list(block.get("vllm_args"), f"{field}.vllm_args"),
                  env=str_map(block.get("env"), f"{field}.env"),
                  hardware_overrides=_overrides(block.get("hardware_overrides"), f"{field}.hardware_overrides"))


def _strategy_override(value: Any, field: str) -> StrategyOverride:
    block = mapping(value, field)
    # Upstream spells the same thing two ways (`extra_args`/`vllm_args`, `extra_env`/`env`).
    args = (str_list(block.get("extra_args"), f"{field}.extra_args")
            + str_list(block.get("vllm_args"), f"{field}.vllm_args"))
    env = {**str_map(block.get("env"), f"{field}.env"), **str_map(block.get("extra_env"), f"{field}.extra_env")}
    return StrategyOverride(args=args, env=env,
                            hardware_overrides=_overrides(block.get("hardware_overrides"),
                                                          f"{field}.hardware_overrides"),
                            tp=_tp(block.get("tp"), f"{field}.tp"),
                            router=mapping(block.get("router"), f"{field}.router"),
                            prefill=_pd_role(block.get("prefill"), f"{field}.prefill"),
                            decode=_pd_role(block.get("decode"), f"{field}.decode"),
                            pool_modes=str_list(block.get("pool_modes"), f"{field}.pool_modes"))


def _docker_images(value: Any, field: str) -> dict[str, str]:
    """`model.docker_image`: one image, or upstream's map of images per card, brand or CUDA build. A
    brand may map to its own per-CUDA-build images (`nvidia: {cu130: ...}`): that brand then runs the
    newest build it names, as a top-level CUDA map does on NVIDIA cards."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}  # `docker_image: ""` is upstream's "no dedicated image", not an image named ""
    if isinstance(value, str):
        return {"default": value}
    flat: dict[str, str] = {}
    for key, item in mapping(value, field).items():
        if isinstance(item, dict):
            builds = str_map(item, f"{field}.{key}")
            cuda = sorted(k for k in builds if k.startswith("cu"))
            chosen = builds.get("default") or (builds[cuda[-1]] if cuda else next(iter(builds.values()), None))
            if chosen is None:
                raise BadField(f"{field}.{key}", "an empty map of images")
            flat[str(key)] = chosen
        else:
            flat.update(str_map({key: item}, field))
    return {key: image for key, image in flat.items() if image.strip()}


def _precision_hardware(value: Any, field: str) -> dict[str, list[str]]:
    """A variant's `precision_hardware: {brand?, generation?}`, each one name or a list."""
    out = {}
    for key, item in mapping(value, field).items():
        if key not in ("brand", "generation"):
            raise BadField(f"{field}.{key}", "expected brand or generation")
        out[str(key)] = [str(v).lower() for v in (item if isinstance(item, list) else [item])]
    return out


def _min_gpus(value: Any, field: str) -> dict[str, int | dict[str, int]]:
    """`strategy_min_gpus`: a bare number (every layout), or a map of layout or card id to a floor, a
    card id possibly mapping to per-layout floors."""
    if not isinstance(value, dict):
        return {} if value is None else {"default": _positive(value, field)}
    out: dict[str, int | dict[str, int]] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            out[str(key)] = {str(k): _positive(v, f"{field}.{key}.{k}") for k, v in item.items()}
        else:
            out[str(key)] = _positive(item, f"{field}.{key}")
    return out


def _flag(value: Any, field: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise BadField(field, f"expected true or false, got {value!r}")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _install(value: Any, field: str) -> dict[str, InstallPath]:
    """`model.install`: per path (docker, pip) `false` (not offered), nothing, or {command?, note?}."""
    out = {}
    for name, item in mapping(value, field).items():
        if item is False:
            out[str(name)] = InstallPath(offered=False)
        elif item is None or item is True:
            out[str(name)] = InstallPath()
        else:
            block = mapping(item, f"{field}.{name}")
            out[str(name)] = InstallPath(command=_text(block.get("command")), note=_text(block.get("note")))
    return out


def _dependencies(value: Any, field: str) -> list[Dependency]:
    out = []
    for i, item in enumerate(items(value, field)):
        block = mapping(item, f"{field}[{i}]", required=True)
        if not block.get("command"):
            raise BadField(f"{field}[{i}].command", "missing")
        out.append(Dependency(command=str(block["command"]), note=_text(block.get("note")),
                              optional=bool(_flag(block.get("optional"), f"{field}[{i}].optional")),
                              brand=_text(block.get("brand")),
                              install_modes=str_list(block.get("install_modes"), f"{field}[{i}].install_modes")))
    return out


def _floor_gb(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadField(field, f"expected a number of GB, got {value!r}")
    return float(value)


def _omni_tasks(value: Any, field: str) -> list[OmniTask]:
    """`omni.tasks`: a task id, or a task with its own floor and per-card floors and args, its label, the
    checkpoint it loads and its place on the recipe's choice axes."""
    tasks = []
    for i, item in enumerate(items(value, field)):
        if isinstance(item, str):
            tasks.append(OmniTask(id=item))
            continue
        block = mapping(item, f"{field}[{i}]", required=True)
        if not block.get("id"):
            raise BadField(f"{field}[{i}].id", "missing")
        cards = {}
        for card, over in mapping(block.get("hardware_overrides"), f"{field}[{i}].hardware_overrides").items():
            where = f"{field}[{i}].hardware_overrides.{card}"
            o = mapping(over, where)
            cards[str(card)] = OmniTaskOverride(vram_minimum_gb=_floor_gb(o.get("vram_minimum_gb"),
                                                                          f"{where}.vram_minimum_gb"),
                                                args=str_list(o.get("extra_args"), f"{where}.extra_args"))
        tasks.append(OmniTask(id=str(block["id"]), key=_text(block.get("key")), label=_text(block.get("label")),
                              model_id=_text(block.get("model_id")),
                              axes=str_map(block.get("axes"), f"{field}[{i}].axes"),
                              endpoint=_text(block.get("endpoint")),
                              vram_minimum_gb=_floor_gb(block.get("vram_minimum_gb"), f"{field}[{i}].vram_minimum_gb"),
                              args=str_list(block.get("extra_args"), f"{field}[{i}].extra_args"),
                              hardware_overrides=cards))
    return tasks


def _is_omni(doc: dict[str, Any], meta: dict[str, Any]) -> bool:
    tasks = meta.get("tasks")
    return "omni" in doc or (isinstance(tasks, list) and "omni" in tasks)


def parse_recipe(text: str, path: str, parts: PartProblems | None = None) -> Recipe:
    """One `models/<org>/<repo>.yaml` (`path`, relative to the snapshot's root). A bad field drops that
    part (noted in `parts` with its field path) and keeps the rest; only a file that is not a YAML
    mapping, or has no usable variant, raises BadField."""
    parts = parts or PartProblems(path)
    data, root_node = parse_yaml(text)
    doc = mapping(data, "(document)", required=True)
    empty: dict[str, Any] = {}
    no_names: list[str] = []
    meta = parts.keep(lambda: mapping(doc.get("meta"), "meta", required=True), empty)
    model = parts.keep(lambda: mapping(doc.get("model"), "model", required=True), empty)
    rel = PurePosixPath(path).relative_to("models").with_suffix("").as_posix()
    model_id = model.get("model_id")
    if not isinstance(model_id, str) or "/" not in model_id:
        parts.note("model.model_id", f"missing or not an org/name id; using the recipe path {rel}")
        model_id = rel
    estimates = _estimate_flags(text, root_node)
    variants = parts.each(doc.get("variants"), "variants",
                          lambda k, v, f: _variant(k, v, f, estimates.get(k, False)))
    if not variants:
        raise BadField("variants", "no usable variant (nothing to size or serve)")
    if "default" not in variants and "default" not in mapping(doc.get("variants"), "variants"):
        parts.note("variants.default", f"missing; {next(iter(variants))} stands in as the default")
    features = parts.each(doc.get("features"), "features", lambda k, v, f: _feature(v, f))
    opt_in = []
    for i, name in enumerate(parts.keep(lambda: str_list(doc.get("opt_in_features"), "opt_in_features"), no_names)):
        if name in features:
            opt_in.append(name)
        else:
            parts.note(f"opt_in_features[{i}]", f"{name!r} is not a feature of this recipe")
    omni = _is_omni(doc, meta)
    strategies = parts.keep(lambda: str_list(doc.get("compatible_strategies"), "compatible_strategies"), no_names)
    if not strategies and not omni:
        parts.note("compatible_strategies", "missing or empty: no layout to serve with", scope="warning")
    min_gpus = parts.keep(lambda: _min_gpus(doc.get("strategy_min_gpus"), "strategy_min_gpus"),
                          dict[str, int | dict[str, int]]())
    unknown = unknown_fields(doc)
    if unknown:
        parts.note("(fields)", f"not read by the importer (newer than it?): {', '.join(unknown)}", scope="warning")
    omni_block = parts.keep(lambda: mapping(doc.get("omni"), "omni"), empty)
    try:
        return Recipe(
            path=rel, model_id=model_id, title=str(meta.get("title") or model_id),
            architecture=model.get("architecture"), parameter_count=_opt_str(model.get("parameter_count")),
            context_length=parts.keep(lambda: _opt_int(model.get("context_length"), "model.context_length"), None),
            min_vllm_version=_opt_str(model.get("min_vllm_version")),
            tasks=parts.keep(lambda: str_list(meta.get("tasks"), "meta.tasks"), list[str]()),
            hardware=parts.keep(lambda: str_map(meta.get("hardware"), "meta.hardware"), dict[str, str]()),
            default_hardware=_opt_str(meta.get("default_hardware")),
            base_args=parts.keep(lambda: str_list(model.get("base_args"), "model.base_args"), list[str]()),
            base_env=parts.keep(lambda: str_map(model.get("base_env"), "model.base_env"), dict[str, str]()),
            features=features, opt_in_features=opt_in,
            hardware_opt_in_features=parts.each(doc.get("hardware_opt_in_features"), "hardware_opt_in_features",
                                                lambda k, v, f: str_list(v, f)),
            variants=variants, compatible_strategies=strategies,
            strategy_hardware=parts.each(doc.get("strategy_hardware"), "strategy_hardware",
                                         lambda k, v, f: str_map(v, f)),
            strategy_min_gpus=min_gpus, default_strategy=_opt_str(doc.get("default_strategy")),
            hardware_overrides=parts.each(doc.get("hardware_overrides"), "hardware_overrides",
                                          lambda k, v, f: _override(v, f)),
            strategy_overrides=parts.each(doc.get("strategy_overrides"), "strategy_overrides",
                                          lambda k, v, f: _strategy_override(v, f)),
            docker_images=parts.keep(lambda: _docker_images(model.get("docker_image"), "model.docker_image"),
                                     dict[str, str]()),
            omni=omni,
            omni_tasks=parts.keep(lambda: _omni_tasks(omni_block.get("tasks"), "omni.tasks"), list[OmniTask]()),
            supports_dcp=parts.keep(lambda: _flag(model.get("supports_dcp"), "model.supports_dcp"), None),
            kv_offload_support=parts.keep(lambda: str_map(doc.get("kv_offload_support"), "kv_offload_support"),
                                          dict[str, str]()),
            nightly_required=bool(parts.keep(lambda: _flag(model.get("nightly_required"), "model.nightly_required"),
                                             None)),
            flashinfer_autotune=parts.keep(lambda: _flag(model.get("flashinfer_autotune"),
                                                         "model.flashinfer_autotune"), None),
            install=parts.keep(lambda: _install(model.get("install"), "model.install"), dict[str, InstallPath]()),
            dependencies=parts.keep(lambda: _dependencies(doc.get("dependencies"), "dependencies"), list[Dependency]()),
            source_path=path)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def _opt_int(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadField(field, f"expected a whole number, got {value!r}")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def parse_strategy(text: str, path: str) -> Strategy:
    """One `strategies/<name>.yaml` (`path`, relative to the snapshot's root)."""
    doc = mapping(_load_yaml(text), "(document)", required=True)
    match = mapping(doc.get("hardware_match"), "hardware_match")
    if not doc.get("parallel_flag"):
        raise BadField("parallel_flag", "missing")
    try:
        return Strategy(name=doc.get("name") or PurePosixPath(path).stem, deploy_type=doc.get("deploy_type"),
                        args=str_list(doc.get("vllm_args"), "vllm_args"), env=str_map(doc.get("env"), "env"),
                        parallel_flag=doc["parallel_flag"], parallelism=doc.get("parallelism"),
                        min_gpus=match.get("min_gpus", 1), max_gpus=match.get("max_gpus"),
                        multi_node=bool(match.get("multi_node", False)),
                        moe_only=match.get("architecture") == "moe",
                        prefill=_pd_role(doc.get("prefill"), "prefill"), decode=_pd_role(doc.get("decode"), "decode"),
                        source_path=path)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def parse_taxonomy(text: str) -> dict[str, HardwareProfile]:
    doc = mapping(_load_yaml(text), "(document)", required=True)
    out = {}
    for key, value in mapping(doc.get("hardware_profiles"), "hardware_profiles", required=True).items():
        block = mapping(value, f"hardware_profiles.{key}", required=True)
        try:
            out[str(key)] = HardwareProfile(
                id=str(key), brand=block.get("brand"), generation=block.get("generation"),
                display_name=block.get("display_name") or str(key), gpu_count=block.get("gpu_count"),
                vram_gb=block.get("vram_gb"), scalable=block.get("scalable", True),
                restricted=block.get("restricted", False))
        except ValidationError as exc:
            raise from_validation_error(exc, f"hardware_profiles.{key}") from None
    return out


def import_vllm(files: Snapshot) -> tuple[dict[str, Recipe], dict[str, Strategy], dict[str, HardwareProfile],
                                         list[ImportProblem]]:
    """Everything usable in a vLLM recipes snapshot, plus one problem per file or part that was not."""
    problems: list[ImportProblem] = []

    def attempt(path: str, parse):
        text = files[path]
        if isinstance(text, Unreadable):
            problems.append(ImportProblem(file=path, field="(file)", reason=text.reason))
            return None
        try:
            return parse(text)
        except BadField as exc:
            problems.append(ImportProblem(file=path, field=exc.field, reason=exc.reason))
        return None

    hardware: dict[str, HardwareProfile] = {}
    if TAXONOMY in files:
        hardware = attempt(TAXONOMY, parse_taxonomy) or {}
    else:
        problems.append(ImportProblem(file=TAXONOMY, field="(file)", reason="missing"))
    strategies = {}
    for path in sorted((p for p in files if STRATEGY_FILES.fullmatch(p)), key=path_order):
        strategy = attempt(path, lambda text, path=path: parse_strategy(text, path))
        if strategy:
            strategies[strategy.name] = strategy
    recipes = {}
    for path in sorted((p for p in files if RECIPE_FILES.fullmatch(p)), key=path_order):
        parts = PartProblems(path)
        recipe = attempt(path, lambda text, path=path, parts=parts: _checked(parse_recipe(text, path, parts),
                                                                             strategies, hardware, parts))
        problems.extend(parts.problems)
        if recipe:
            recipes[recipe.path] = recipe
    return recipes, strategies, hardware, problems


def _checked(recipe: Recipe, strategies: dict[str, Strategy], hardware: dict[str, HardwareProfile],
             parts: PartProblems) -> Recipe:
    """Names a recipe refers to must exist in the shared vocabulary, or its evidence would lie: an
    unknown layout or card is dropped from the recipe (and noted); the rest stays."""
    update: dict[str, Any] = {}
    if strategies:
        kept = []
        for i, name in enumerate(recipe.compatible_strategies):
            if name in strategies:
                kept.append(name)
            else:
                parts.note(f"compatible_strategies[{i}]", f"unknown strategy {name!r}")
        update["compatible_strategies"] = kept
        if recipe.default_strategy and recipe.default_strategy not in strategies:
            parts.note("default_strategy", f"unknown strategy {recipe.default_strategy!r}")
            update["default_strategy"] = None
    if hardware:
        unknown = [name for name in recipe.hardware if name not in hardware]
        for name in unknown:
            parts.note(f"meta.hardware.{name}", "not a hardware profile in taxonomy.yaml: card dropped",
                       scope="warning")
        words = [name for name, word in recipe.hardware.items()
                 if name not in unknown and word not in HARDWARE_STATUSES]
        for name in words:
            parts.note(f"meta.hardware.{name}", f"unknown status {recipe.hardware[name]!r} (known: "
                       f"{', '.join(HARDWARE_STATUSES)}): card dropped")
        update["hardware"] = {k: v for k, v in recipe.hardware.items() if k not in unknown and k not in words}
    return recipe.model_copy(update=update)

"""One worker of a Dynamo graph read into the catalog, one handler per thing upstream states about it:
the model it loads and serves (flags, env, config-file keys), its engine sizes (flags, else the
engine's config file), its role (component type, name, disaggregation flags), its card (node labels)
and the warnings its fields earn (padded args, zero replicas, a placeholder node selector)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wingsmith.domain.hardware import hardware_for_product_label
from wingsmith.domain.recipes.dynamo_components import (
    Component,
    argv,
    config_file,
    env_of,
    expand,
    flag_value,
    product_labels,
    whole_number,
)
from wingsmith.domain.recipes.models import DynamoWorker, MaxConcurrency
from wingsmith.domain.recipes.problems import PartProblems

# The engine setting that caps concurrent sequences, per backend.
CONCURRENCY_SETTING = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "trtllm": "max_batch_size"}
# Flags (and config-file keys) per backend for the tensor-parallel size and the concurrency cap.
_TP_FLAGS = ("--tensor-parallel-size", "--tp", "--tp-size", "--tp_size")
_CAP_FLAGS = {"vllm": ("--max-num-seqs",), "sglang": ("--max-running-requests",),
              "trtllm": ("--max-batch-size", "--max_batch_size")}
_TP_KEYS = ("tensor_parallel_size", "tensor-parallel-size", "tp_size", "tp-size", "tp")
_DP_FLAGS = ("--data-parallel-size", "-dp", "--dp", "--dp-size", "--dp_size")
_DP_KEYS = ("data_parallel_size", "data-parallel-size", "dp_size", "dp-size")
_CAP_KEYS = {"vllm": ("max_num_seqs", "max-num-seqs"), "sglang": ("max_running_requests", "max-running-requests"),
             "trtllm": ("max_batch_size", "max-batch-size")}
# Flags that name the model, the served name last (it is also the name clients ask for).
_MODEL_FLAGS = ("--model", "--model-path", "--served-model-name")
# Env vars upstream manifests name the served model with, most specific first.
_MODEL_ENV = ("SERVED_MODEL_NAME", "MODEL_NAME", "MODEL_PATH", "MODEL", "HF_MODEL_ID", "MODEL_ID")
# Keys an engine config file (SGLang's `--config`) names the model with.
_MODEL_KEYS = ("model-path", "model_path", "model", "served-model-name", "served_model_name")
_CONFIG_FLAGS = ("--extra-engine-args", "--extra-engine-args-path", "--config")


@dataclass(frozen=True)
class Command:
    """What a worker's container runs: its env, its tokens as written, and as the shell expands them."""
    env: dict[str, str]
    raw: list[str]
    argv: list[str]


def command_of(comp: Component) -> Command:
    env = env_of(comp.container)
    raw = argv(comp.container)
    return Command(env, raw, [(expand(t, env) or t).strip() for t in raw])


# ---- the model: (name, where it was said) pairs, per source, in the order they are trusted ----------

def _is_repo_id(value: Any) -> bool:
    return isinstance(value, str) and "/" in value and not value.startswith("/")


def names_from_flags(command: Command, config: dict) -> list[tuple[str, str]]:
    """`--model`, `--model-path`, `--served-model-name`; a value from env says which variable."""
    found = []
    for flag in _MODEL_FLAGS:
        value = flag_value(command.argv, flag)
        if _is_repo_id(value) and not str(value).startswith("$"):
            var = re.search(r"\$\{?\(?(\w+)", flag_value(command.raw, flag) or "")
            found.append((str(value), f"{flag} from env {var.group(1)}" if var else flag))
    return found


def names_from_env(command: Command, config: dict) -> list[tuple[str, str]]:
    return [(command.env[key], f"env {key}") for key in _MODEL_ENV if _is_repo_id(command.env.get(key))]


def names_from_config(command: Command, config: dict) -> list[tuple[str, str]]:
    return [(config[key], f"config file key {key}") for key in _MODEL_KEYS if _is_repo_id(config.get(key))]


_NAME_SOURCES: tuple[Callable[[Command, dict], list[tuple[str, str]]], ...] = (
    names_from_flags, names_from_env, names_from_config)


@dataclass(frozen=True)
class ModelNames:
    names: list[str]  # every model id stated, first seen first
    source: str | None  # where the first was stated
    served: tuple[str, str] | None  # `--served-model-name` and where it was stated


def model_names(command: Command, config: dict) -> ModelNames:
    names: list[str] = []
    source = None
    for read in _NAME_SOURCES:
        for value, said in read(command, config):
            if value not in names:
                names.append(value)
                source = source or said
    served = next(((v, s) for v, s in names_from_flags(command, config) if s.startswith("--served-model-name")),
                  None)
    return ModelNames(names, source, served)


# ---- engine sizes: a flag wins, else the engine's config file ----------------------------------------

def _stated(command: Command, config: dict, flags: tuple[str, ...], keys: tuple[str, ...]) -> Any:
    value = flag_value(command.argv, *flags)
    return value if value is not None else next((config[k] for k in keys if config.get(k) is not None), None)


@dataclass(frozen=True)
class Sizes:
    tensor_parallel: Any
    data_parallel: Any
    concurrency_cap: Any


def engine_sizes(command: Command, config: dict, backend: str) -> Sizes:
    return Sizes(_stated(command, config, _TP_FLAGS, _TP_KEYS), _stated(command, config, _DP_FLAGS, _DP_KEYS),
                 _stated(command, config, _CAP_FLAGS[backend], _CAP_KEYS[backend]))


# ---- role ---------------------------------------------------------------------------------------------

def disaggregation_mode(command: Command) -> str | None:
    """The phase an engine is told to serve alone (`--disaggregation-mode`, vLLM's `--is-prefill-worker`)."""
    return flag_value(command.argv, "--disaggregation-mode") or (
        "prefill" if "--is-prefill-worker" in command.argv else None)


def worker_role(comp: Component, mode: str | None) -> str | None:
    """The component's role, unless the engine's own disaggregation mode says the phase."""
    role = comp.kind_role or comp.role
    if mode in ("prefill", "decode") and role in ("worker", None):
        return mode
    return role


# ---- fields that earn a warning -------------------------------------------------------------------

def note_padded_args(comp: Component, command: Command, parts: PartProblems) -> None:
    # A token with leading whitespace is one the shell or the engine would mangle: an args item from a
    # folded scalar with an indentation indicator, or a folded script whose `\` line continuations
    # became `\ ` (an escaped space glued to the next flag). The engine would not see that flag.
    for token in command.raw:
        if token != token.lstrip() and token.strip():
            parts.note(f"{comp.field}.args", f"{token!r} starts with whitespace (a folded scalar?): the engine "
                       "receives it as is, not as a flag; read here as if trimmed", scope="warning")


def note_scaled_to_zero(comp: Component, command: Command, parts: PartProblems) -> None:
    if comp.scaled_to_zero:
        parts.note(f"{comp.field}.replicas", "0 (the graph starts scaled to zero): read as 1 replica",
                   scope="warning")


def note_placeholder_selector(comp: Component, command: Command, parts: PartProblems) -> None:
    selector = comp.pod_spec.get("nodeSelector")
    if selector is not None and not isinstance(selector, dict):
        # `nodeSelector: ${HW_NODE_SELECTOR}`: a placeholder a script fills in before applying.
        parts.note(f"{comp.field}.extraPodSpec.nodeSelector", f"{selector!r} is not a mapping (a placeholder "
                   "filled in before apply?): the worker's card is unknown", scope="warning")


_NOTES = (note_padded_args, note_scaled_to_zero, note_placeholder_selector)


# ---- the worker ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReadWorker:
    worker: DynamoWorker
    models: ModelNames
    labels: list[str]  # the card labels its node selector states
    split: bool  # its engine runs one phase of disaggregated serving


def read_worker(comp: Component, backend: str, config_maps: dict[str, dict[str, str]],
                parts: PartProblems) -> ReadWorker:
    command = command_of(comp)
    for note in _NOTES:
        note(comp, command, parts)
    config = config_file(flag_value(command.argv, *_CONFIG_FLAGS), comp, config_maps)
    sizes = engine_sizes(command, config, backend)
    labels = product_labels(comp.pod_spec)
    card = hardware_for_product_label(labels[0]) if labels else None
    mode = disaggregation_mode(command)
    role = worker_role(comp, mode)
    setting = CONCURRENCY_SETTING[backend]
    worker = DynamoWorker(
        name=comp.name, role="aggregated" if role == "worker" else role, gpus=comp.gpus, nodes=comp.nodes,
        replicas=comp.replicas, card=card.id if card else None, card_label=labels[0] if labels else None,
        tensor_parallel_size=whole_number(sizes.tensor_parallel, f"{comp.field}.args.tensor-parallel-size"),
        data_parallel_size=whole_number(sizes.data_parallel, f"{comp.field}.args.data-parallel-size"),
        max_concurrency=MaxConcurrency(setting=setting,
                                       value=whole_number(sizes.concurrency_cap, f"{comp.field}.args.{setting}")))
    return ReadWorker(worker, model_names(command, config), labels, mode in ("prefill", "decode"))

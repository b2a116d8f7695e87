"""Reading and completing engine argument lists (vLLM, SGLang, TensorRT-LLM under Dynamo).

Only what rendering must know is read here: which identity flags (model, served name, revision) are
present (the ranks the arguments ask for are read by wingsmith/domain/dynamo/ranks.py).
Flags follow argparse semantics: `--flag value` or `--flag=value`, the last occurrence wins.
"""

from __future__ import annotations

from collections.abc import Iterable

from wingsmith.domain.dynamo.ranks import PARALLEL_FLAGS
from wingsmith.domain.dynamo.rollout_spec import Engine


def flag_value(args: list[str], names: Iterable[str]) -> str | None:
    names = tuple(names)
    found: str | None = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name:
                if i + 1 >= len(args) or args[i + 1].startswith("--"):
                    raise ValueError(f"engine flag {name} has no value")
                found = args[i + 1]
            elif arg.startswith(name + "="):
                found = arg[len(name) + 1:]
    return found


def has_flag(args: list[str], names: Iterable[str]) -> bool:
    names = tuple(names)
    return any(a in names or a.split("=", 1)[0] in names for a in args)


MODEL_FLAGS = {Engine.vllm: ("--model",), Engine.sglang: ("--model-path", "--model"),
               Engine.trtllm: ("--model-path",)}
SERVED_NAME_FLAGS = ("--served-model-name",)
REVISION_FLAGS = {Engine.vllm: ("--revision",), Engine.sglang: ("--revision",), Engine.trtllm: ()}
MAX_NUM_SEQS_FLAGS = {Engine.vllm: ("--max-num-seqs",), Engine.sglang: ("--max-running-requests",),
                      Engine.trtllm: ("--max-batch-size",)}


# `vllm serve` flags that belong to its HTTP server, not the engine: Dynamo's frontend serves HTTP,
# so a Dynamo vLLM worker would refuse them. Value-taking ones first.
_SERVE_ONLY_WITH_VALUE = ("--port", "--host", "--api-key", "--uvicorn-log-level", "--root-path",
                          "--ssl-keyfile", "--ssl-certfile", "--allowed-origins")
_SERVE_ONLY_SWITCHES = ("--enable-auto-tool-choice",)
# Per-node rendezvous flags: the Dynamo operator sets them on each pod of a multi-node replica.
_RENDEZVOUS_WITH_VALUE = ("--nnodes", "--node-rank", "--master-addr", "--master-port",
                          "--data-parallel-start-rank", "--data-parallel-address",
                          "--data-parallel-rpc-port", "--data-parallel-rank")
_RENDEZVOUS_SWITCHES = ("--headless",)
# Dynamo parses tool calls and reasoning itself, under its own flag names.
_PARSER_FLAGS = {"--tool-call-parser": "--dyn-tool-call-parser",
                 "--reasoning-parser": "--dyn-reasoning-parser"}


def drop_flags(args: list[str], with_value: tuple[str, ...], switches: tuple[str, ...]) -> list[str]:
    """`args` without the flags in `with_value` (each with its value, `--flag value` or `--flag=value`)
    and the switches in `switches`."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in with_value:
            skip = "=" not in arg
            continue
        if name in switches:
            continue
        out.append(arg)
    return out


def dynamo_vllm_args(args: list[str]) -> list[str]:
    """`vllm serve` arguments as a Dynamo vLLM worker takes them (idempotent).

    HTTP-server flags go (the Dynamo frontend serves HTTP), per-node rendezvous flags go (the
    operator sets them per pod), and tool-call/reasoning parsers are also named to Dynamo.
    `--tool-call-parser` is a server flag in vLLM; `--reasoning-parser` is kept because the engine
    uses it for structured output."""
    out = drop_flags(args, _SERVE_ONLY_WITH_VALUE + _RENDEZVOUS_WITH_VALUE,
                     _SERVE_ONLY_SWITCHES + _RENDEZVOUS_SWITCHES)
    tool = flag_value(out, ("--tool-call-parser",))
    out = drop_flags(out, ("--tool-call-parser",), ())
    for vllm_flag, dyn_flag in _PARSER_FLAGS.items():
        value = tool if vllm_flag == "--tool-call-parser" else flag_value(out, (vllm_flag,))
        if value is not None and flag_value(out, (dyn_flag,)) is None:
            out += [dyn_flag, value]
    return out


# vLLM's short spellings, so a recipe's `-tp 8` is replaced rather than contradicted.
_VLLM_ALIASES = {names[0]: names for names in PARALLEL_FLAGS[Engine.vllm] if names}


def with_flag(args: list[str], flag: str, value: str | None) -> list[str]:
    """`args` with `flag` (under any of its vLLM spellings) set to `value`, or removed when `value` is None."""
    out = drop_flags(args, _VLLM_ALIASES.get(flag, (flag,)), ())
    return out if value is None else [*out, flag, value]


def with_switch(args: list[str], flag: str, on: bool) -> list[str]:
    """`args` with a flag that takes no value present exactly when `on`."""
    out = drop_flags(args, (), (flag,))
    return [*out, flag] if on else out

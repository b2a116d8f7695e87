"""The one invariant every shape the plane renders keeps: the ranks an engine command asks for equal the
GPUs placement reserves for one worker.

Read as the engine reads its flags (argparse: every spelling of a flag is one option, the last occurrence
wins): vLLM's `--tensor-parallel-size`/`-tp`, `--pipeline-parallel-size`/`-pp`, `--data-parallel-size`/`-dp`
and `--data-parallel-size-local`; `--enable-expert-parallel` splits the experts over ranks that already
exist and adds none. A worker is one DGD component replica: `nodes` pods of `gpus_per_node` GPUs each.

- TP × PP × DP must equal nodes × GPUs per node: fewer ranks leave reserved GPUs idle, more ranks than GPUs
  never start (a 1T MoE with `--tensor-parallel-size 8` in its base args beside `--data-parallel-size 16`
  asks for 128 ranks on 16 GPUs).
- With `--data-parallel-size-local`, each node runs that many data-parallel ranks of TP × PP GPUs each, so
  local × TP × PP must equal the GPUs per node and local × nodes the data-parallel size.

Pure and shared: command synthesis (wingsmith/domain/recipes/command.py) refuses a shape that breaks it,
workload planning refuses it at creation (wingsmith/domain/workloads.py), rendering refuses it
(wingsmith/domain/dynamo/render.py) and the rollout's apply activity checks it again before anything
reaches a cluster."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from wingsmith.domain.dynamo.rollout_spec import Engine


class RanksMismatch(ValueError):
    """A command whose ranks do not equal the GPUs its worker reserves; the message says both."""


class Ranks(BaseModel, frozen=True):
    tp: int = 1
    pp: int = 1
    dp: int = 1
    dp_local: int | None = None  # data-parallel ranks on each node, when the command says
    expert_parallel: bool = False

    @property
    def total(self) -> int:
        return self.tp * self.pp * self.dp

    def describe(self) -> str:
        local = f" ({self.dp_local} per node)" if self.dp_local is not None else ""
        return f"TP {self.tp} × PP {self.pp} × DP {self.dp}{local} = {self.total} ranks"


# Per engine: (tensor, pipeline, data, data-local) parallel flag spellings.
PARALLEL_FLAGS: dict[Engine, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    Engine.vllm: (("--tensor-parallel-size", "-tp"), ("--pipeline-parallel-size", "-pp"),
                  ("--data-parallel-size", "-dp"), ("--data-parallel-size-local", "-dpl")),
    Engine.sglang: (("--tp", "--tp-size", "--tensor-parallel-size"),
                    ("--pp", "--pp-size", "--pipeline-parallel-size"),
                    ("--dp", "--dp-size", "--data-parallel-size"), ()),
    Engine.trtllm: (("--tensor-parallel-size",), ("--pipeline-parallel-size",), (), ()),
}
EXPERT_PARALLEL_FLAGS = ("--enable-expert-parallel", "-ep")


def _value(args: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the last occurrence of any spelling (`--flag v`, `--flag=v`), as argparse keeps it."""
    found: str | None = None
    for i, arg in enumerate(args):
        name, eq, inline = arg.partition("=")
        if name not in names:
            continue
        if eq:
            found = inline
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            found = args[i + 1]
        else:
            raise ValueError(f"engine flag {name} has no value")
    return found


def _size(args: list[str], names: tuple[str, ...]) -> int | None:
    if not names:
        return None
    raw = _value(args, names)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"engine flag {names[0]} needs a whole number, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"engine flag {names[0]} must be at least 1, got {value}")
    return value


def _has(args: Iterable[str], names: tuple[str, ...]) -> bool:
    return any(a.split("=", 1)[0] in names for a in args)


def engine_ranks(engine: Engine | str, args: list[str]) -> Ranks | None:
    """The ranks `args` ask for, or None when they do not say (TensorRT-LLM reading its parallelism from an
    engine-config file). Raises ValueError for a malformed size flag."""
    engine = Engine(engine)
    tp_names, pp_names, dp_names, local_names = PARALLEL_FLAGS[engine]
    if engine is Engine.trtllm and not _has(args, tp_names + pp_names) and _has(args, ("--extra-engine-args",)):
        return None
    dp = _size(args, dp_names) or 1
    # SGLang's DP attention runs its data-parallel ranks inside the tensor-parallel group.
    if engine is Engine.sglang and _has(args, ("--enable-dp-attention",)):
        dp = 1
    return Ranks(tp=_size(args, tp_names) or 1, pp=_size(args, pp_names) or 1, dp=dp,
                 dp_local=_size(args, local_names), expert_parallel=_has(args, EXPERT_PARALLEL_FLAGS))


def ranks_problem(engine: Engine | str, args: list[str], *, gpus_per_node: int, nodes: int = 1) -> str | None:
    """Why `args` cannot run on a worker of `nodes` × `gpus_per_node` GPUs, or None when its ranks fill them."""
    try:
        ranks = engine_ranks(engine, args)
    except ValueError as exc:
        return str(exc)
    if ranks is None:
        return None
    reserved = gpus_per_node * nodes
    if ranks.total != reserved:
        return (f"the command asks for {ranks.describe()} but its worker reserves {nodes} node(s) × "
                f"{gpus_per_node} GPUs = {reserved}")
    if ranks.dp_local is not None:
        per_node = ranks.dp_local * ranks.tp * ranks.pp
        if per_node != gpus_per_node or ranks.dp_local * nodes != ranks.dp:
            return (f"the command runs {ranks.dp_local} data-parallel rank(s) of TP {ranks.tp} × PP {ranks.pp} on "
                    f"each node ({per_node} GPUs, {ranks.dp_local * nodes} ranks over {nodes} node(s)) but each "
                    f"node reserves {gpus_per_node} GPUs and the data-parallel size is {ranks.dp}")
    return None


def check_ranks(engine: Engine | str, args: list[str], *, gpus_per_node: int, nodes: int = 1) -> None:
    """Raise RanksMismatch unless the command's ranks equal the GPUs its worker reserves."""
    problem = ranks_problem(engine, args, gpus_per_node=gpus_per_node, nodes=nodes)
    if problem is not None:
        raise RanksMismatch(problem)

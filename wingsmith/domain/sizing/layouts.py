"""How each parallelism layout places weights and KV cache on one GPU.

The plane's choices, per layout (`gpus` = GPUs of one replica group, `n` = GPUs per node):

- `single_node_tp`: tensor parallel over 1..n GPUs of one node. Attention, dense MLPs, experts and
  the (vocabulary-parallel) embeddings are all split `tp` ways. KV heads are split across ranks
  and replicated once ranks outnumber them; the MLA latent and indexer keys are replicated on every
  rank. Every rank sees every sequence.
- `single_node_tep`: tensor parallel over 2..n GPUs of one node with expert parallelism. Per GPU
  this equals TP (attention split `tp` ways, each GPU holds 1/`gpus` of the routed experts). MoE
  models only.
- `single_node_dep`: every GPU of one node is a data-parallel rank with expert parallelism across
  them, placed like `multi_node_dep` within one node. MoE models only.
- `multi_node_tp`: the same, with `tp` = all GPUs of two or more whole nodes.
- `multi_node_tep`: tensor parallel over all GPUs of two or more nodes with expert parallelism:
  attention split `tp` ways, each GPU holds 1/`gpus` of the routed experts. Per GPU this equals
  TP. MoE models only.
- `multi_node_tp_pp`: TP over the GPUs of a node, one pipeline stage per node. Each GPU holds
  1/(tp × pp) of the weights and the KV of its stage's 1/pp of the layers for every sequence.
- `multi_node_dep`: every GPU is a data-parallel rank with expert parallelism across all of them:
  attention, dense MLPs, shared experts and embeddings are replicated on every rank, routed
  experts are split `gpus` ways, and each rank keeps the unsharded KV of its own
  ceil(concurrency / gpus) sequences. MoE models only.
- `multi_node_tp_dp`: attention is tensor-parallel within each node and data-parallel across
  nodes (each node serves ceil(concurrency / nodes) sequences); for MoE models vLLM shards the
  routed experts over every DP × TP rank, so experts are split `gpus` ways and the rest per node.
- `pd_cluster`: the GPUs are split evenly into a prefill pool and a decode pool, each a
  tensor-parallel replica over half the GPUs (within one node, or whole nodes). The decode pool
  holds the KV of every running sequence, so it is the one sized; the prefill pool needs no more than that.

A layout is refused (with the reason) when the GPU count cannot form it: partial nodes for the
multi-node layouts, a TP size that does not divide the attention heads, or the KV heads not
dividing (or being divided by) the TP size.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from wingsmith.domain.hardware import Hardware
from wingsmith.domain.sizing.figures import SizingError
from wingsmith.domain.sizing.model_config import TextModel

Layout = Literal["single_node_tp", "single_node_tep", "single_node_dep", "multi_node_tp", "multi_node_tep",
                 "multi_node_tp_pp", "multi_node_dep", "multi_node_tp_dp", "pd_cluster"]
LAYOUTS: tuple[str, ...] = Layout.__args__  # type: ignore[attr-defined]
MOE_ONLY = {"single_node_tep", "single_node_dep", "multi_node_tep", "multi_node_dep"}
# Upstream's strategies/: expert-parallel layouts need at least two GPUs to split experts over.
SINGLE_NODE = {"single_node_tp": 1, "single_node_tep": 2, "single_node_dep": 2}


class ParallelPlan(BaseModel, frozen=True):
    layout: str
    gpus: int
    nodes: int
    tp: int  # tensor-parallel size of the attention
    pp: int = 1
    dp: int = 1  # data-parallel ranks that split the sequences
    expert_split: int  # ways the routed experts are split
    dense_split: int  # ways attention, dense MLPs and embeddings are split
    sized_pool: str = "replica"  # which GPUs the per-GPU figures describe

    def sequences_per_gpu(self, concurrency: int) -> int:
        return math.ceil(concurrency / self.dp)


class InvalidLayout(SizingError):
    pass


def _check_tp(model: TextModel, tp: int, layout: str) -> None:
    if model.num_attention_heads % tp:
        raise InvalidLayout(f"{layout}: tensor-parallel size {tp} does not divide the "
                            f"{model.num_attention_heads} attention heads")
    uses_kv_heads = model.count("full") + model.count("sliding")
    kv = model.num_kv_heads
    if uses_kv_heads and kv % tp and tp % kv:
        raise InvalidLayout(f"{layout}: tensor-parallel size {tp} and the {kv} KV heads do not divide "
                            "one another")
    if model.linear and model.linear.num_heads % tp:
        raise InvalidLayout(f"{layout}: tensor-parallel size {tp} does not divide the "
                            f"{model.linear.num_heads} linear-attention heads")


def plan(model: TextModel, layout: str, gpus: int, hardware: Hardware) -> ParallelPlan:
    """The parallel plan for `gpus` GPUs of `hardware` in `layout`, or InvalidLayout saying why not."""
    if layout not in LAYOUTS:
        raise SizingError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if gpus < 1:
        raise InvalidLayout(f"{layout}: the GPU count must be at least 1, got {gpus}")
    if layout in MOE_ONLY and not model.is_moe:
        raise InvalidLayout(f"{layout} needs a mixture-of-experts model; {model.model_type} is dense")
    if layout in SINGLE_NODE:
        return _single_node(model, layout, gpus, hardware)
    if layout == "pd_cluster":
        return _pd_cluster(model, gpus, hardware)
    n = hardware.gpus_per_node
    if gpus % n or gpus < 2 * n:
        raise InvalidLayout(f"{layout}: needs two or more whole {hardware.display_name} nodes "
                            f"({n} GPUs each), got {gpus} GPUs")
    return _MULTI_NODE[layout](model, layout, gpus, n)


def _single_node(model: TextModel, layout: str, gpus: int, hardware: Hardware) -> ParallelPlan:
    n = hardware.gpus_per_node
    if gpus > n:
        raise InvalidLayout(f"{layout}: {gpus} GPUs exceed the {n} of one {hardware.display_name} node")
    if gpus < SINGLE_NODE[layout]:
        raise InvalidLayout(f"{layout}: needs at least {SINGLE_NODE[layout]} GPUs, got {gpus}")
    if layout == "single_node_dep":
        return ParallelPlan(layout=layout, gpus=gpus, nodes=1, tp=1, dp=gpus, expert_split=gpus, dense_split=1)
    _check_tp(model, gpus, layout)
    return ParallelPlan(layout=layout, gpus=gpus, nodes=1, tp=gpus, expert_split=gpus, dense_split=gpus)


def _pd_cluster(model: TextModel, gpus: int, hardware: Hardware) -> ParallelPlan:
    n = hardware.gpus_per_node
    if gpus < 2 or gpus % 2:
        raise InvalidLayout(f"pd_cluster: needs an even GPU count (a prefill and a decode pool), got {gpus}")
    pool = gpus // 2
    if pool > n and pool % n:
        raise InvalidLayout(f"pd_cluster: a pool of {pool} GPUs is neither within one node nor whole "
                            f"{hardware.display_name} nodes ({n} GPUs each)")
    _check_tp(model, pool, "pd_cluster")
    return ParallelPlan(layout="pd_cluster", gpus=gpus, nodes=math.ceil(gpus / n), tp=pool,
                        expert_split=pool, dense_split=pool, sized_pool="decode")


# The multi-node layouts on `gpus` GPUs of whole nodes of `n` GPUs each.

def _tp_across_nodes(model: TextModel, layout: str, gpus: int, n: int) -> ParallelPlan:
    _check_tp(model, gpus, layout)
    return ParallelPlan(layout=layout, gpus=gpus, nodes=gpus // n, tp=gpus, expert_split=gpus, dense_split=gpus)


def _tp_pp(model: TextModel, layout: str, gpus: int, n: int) -> ParallelPlan:
    _check_tp(model, n, layout)
    nodes = gpus // n
    if nodes > model.num_layers:
        raise InvalidLayout(f"multi_node_tp_pp: {nodes} pipeline stages exceed {model.num_layers} layers")
    return ParallelPlan(layout=layout, gpus=gpus, nodes=nodes, tp=n, pp=nodes, expert_split=gpus, dense_split=gpus)


def _tp_dp(model: TextModel, layout: str, gpus: int, n: int) -> ParallelPlan:
    _check_tp(model, n, layout)
    return ParallelPlan(layout=layout, gpus=gpus, nodes=gpus // n, tp=n, dp=gpus // n,
                        expert_split=gpus if model.is_moe else n, dense_split=n)


def _dep(model: TextModel, layout: str, gpus: int, n: int) -> ParallelPlan:
    return ParallelPlan(layout=layout, gpus=gpus, nodes=gpus // n, tp=1, dp=gpus, expert_split=gpus, dense_split=1)


_MULTI_NODE = {"multi_node_tp": _tp_across_nodes, "multi_node_tep": _tp_across_nodes, "multi_node_tp_pp": _tp_pp,
               "multi_node_tp_dp": _tp_dp, "multi_node_dep": _dep}


def candidate_gpu_counts(layout: str, hardware: Hardware, max_nodes: int = 64) -> list[int]:
    """GPU counts the layout can take on this hardware, smallest first."""
    n = hardware.gpus_per_node
    if layout in SINGLE_NODE:
        return list(range(SINGLE_NODE[layout], n + 1))
    if layout == "pd_cluster":
        pools = list(range(1, n + 1)) + [k * n for k in range(2, max_nodes // 2 + 1)]
        return [2 * pool for pool in pools]
    return [k * n for k in range(2, max_nodes + 1)]

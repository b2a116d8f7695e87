"""The prefill and decode pools of upstream's `pd_cluster` layout on one card: how many nodes and GPUs
each takes, its engine size flags, and each node's rendezvous flags and env. The strategy's block for
the role comes first, the recipe's strategy override for it wins, the override's per-card block last."""

from __future__ import annotations

from dataclasses import dataclass

from wingsmith.domain.recipes.models import HardwareProfile, PdRole
from wingsmith.domain.recipes.rules import InvalidChoice, pick


def for_card(value: int | dict[str, int] | None, profile: HardwareProfile) -> int | None:
    """A figure the recipe gives once or per card (`{h200: 2, default: 1}`)."""
    if isinstance(value, dict):
        return value.get(profile.id, value.get("default"))
    return value


@dataclass(frozen=True)
class PdPool:
    role: str  # prefill or decode
    parallelism: str  # tp, tep or dep
    tp: int | None  # the tensor-parallel size the recipe pins, if any
    nodes: int
    pod_gpus: int  # GPUs of each pod: a whole node, or a TP group smaller than one
    node_gpus: int  # GPUs of one node of the card
    args: list[str]
    env: dict[str, str]

    @property
    def gpus(self) -> int:
        return self.nodes * self.pod_gpus

    @property
    def tp_dp(self) -> tuple[int, int]:
        """Tensor- and data-parallel sizes: expert-data-parallel pools split sequences over TP groups."""
        if self.parallelism == "dep":
            return self.tp or 1, self.gpus // (self.tp or 1)
        return self.tp or self.gpus, 1

    def size_flags(self) -> list[str]:
        tp, dp = self.tp_dp
        if self.parallelism == "dep":
            return ["--tensor-parallel-size", str(tp), "--data-parallel-size", str(dp),
                    "--data-parallel-size-local", str(self.node_gpus // tp), "--enable-expert-parallel"]
        return ["--tensor-parallel-size", str(tp)] + (["--enable-expert-parallel"] if self.parallelism == "tep" else [])

    @property
    def _head(self) -> str:
        return f"${self.role.upper()}_NODE_1"

    def node_flags(self, rank: int) -> list[str]:
        """How node `rank` of a multi-node pool finds the pool's first node (none on a one-node pool)."""
        if self.nodes == 1:
            return []
        if self.parallelism == "dep":
            flags = ["--data-parallel-start-rank", str(rank * (self.node_gpus // (self.tp or 1))),
                     "--data-parallel-address", self._head]
        else:
            flags = ["--nnodes", str(self.nodes), "--node-rank", str(rank), "--master-addr", self._head]
        return flags + (["--headless"] if rank else [])

    def node_env(self, rank: int) -> dict[str, str]:
        """The pool's env on node `rank`: the recipe writes it for the first node (`$PREFILL_NODE_1`)."""
        mine = f"${self.role.upper()}_NODE_{rank + 1}"
        return {k: v.replace(self._head, mine) for k, v in self.env.items()}


def _nodes_and_pod_gpus(role: str, parallelism: str, tp: int | None, nodes: int,
                        profile: HardwareProfile) -> tuple[int, int]:
    gpn = profile.gpu_count
    if not (tp and parallelism in ("tp", "tep")):
        return nodes, gpn
    if tp > gpn and tp % gpn:
        raise InvalidChoice(f"the recipe's pd_cluster {role} pool pins TP {tp}, which is neither within one "
                            f"{profile.id} node nor whole nodes of {gpn} GPUs")
    nodes = max(nodes, -(-tp // gpn))
    # A TP group smaller than the node takes only its GPUs.
    return nodes, (tp if nodes == 1 else gpn)


def pd_pool(role: str, base: PdRole, extra: PdRole, profile: HardwareProfile) -> PdPool:
    """The `role` pool from the strategy's block (`base`) and the recipe's override of it (`extra`)."""
    parallelism = extra.parallelism or base.parallelism or "tp"
    tp = extra.tp or base.tp
    nodes = for_card(extra.nodes, profile) or for_card(base.nodes, profile) or 1
    nodes, pod_gpus = _nodes_and_pod_gpus(role, parallelism, tp, nodes, profile)
    if parallelism == "dep" and profile.gpu_count % (tp or 1):
        raise InvalidChoice(f"the recipe's pd_cluster {role} pool pins TP {tp}, which does not divide the "
                            f"{profile.gpu_count} GPUs of a {profile.id} node")
    _, hw_block = pick(extra.hardware_overrides, profile)
    return PdPool(role=role, parallelism=parallelism, tp=tp, nodes=nodes, pod_gpus=pod_gpus,
                  node_gpus=profile.gpu_count, args=base.args + extra.args + (hw_block.args if hw_block else []),
                  env={**base.env, **extra.env, **(hw_block.env if hw_block else {})})

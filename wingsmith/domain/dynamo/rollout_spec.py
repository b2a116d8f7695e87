"""What one cluster's rollout deploys: the input of DynamoGraphDeployment rendering.

The caller (the workload's plan) has already chosen the layout, the hardware and the engine
arguments; this model only carries those decisions, checks that they fit together, and names
the references (secret, volume claim) the cluster must already hold. Secrets appear by name only.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from wingsmith.domain.hardware import get_hardware, product_label_for

_SHA = re.compile(r"^[0-9a-f]{40}$")
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Engine(StrEnum):
    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"


class Layout(StrEnum):
    single_node_tp = "single_node_tp"
    multi_node_tp = "multi_node_tp"
    multi_node_tep = "multi_node_tep"
    multi_node_tp_pp = "multi_node_tp_pp"
    multi_node_dep = "multi_node_dep"
    multi_node_tp_dp = "multi_node_tp_dp"
    pd_cluster = "pd_cluster"

    @property
    def multi_node(self) -> bool:
        return self.value.startswith("multi_node_")


class WorkerPool(BaseModel):
    """One pool of identical engine workers: the aggregated worker, or a prefill/decode role."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    args: list[str] = Field(description="engine arguments after the engine module, already synthesised")
    gpus_per_node: int = Field(ge=1, description="GPUs each pod requests (one pod per node)")
    nodes: int = Field(default=1, ge=1, description="nodes one worker spans")
    replicas: int = Field(default=1, ge=0, description="replicas of the workload on this cluster")
    workers_per_replica: int = Field(
        default=1, ge=1, le=256, description="workers of this pool in each replica of the workload: one, except in "
        "a disaggregated plan, whose replica may run several prefill workers per decode worker")
    env: dict[str, str] = Field(default_factory=dict)

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one worker of this pool uses (its nodes × GPUs per node)."""
        return self.gpus_per_node * self.nodes

    @property
    def workers(self) -> int:
        """Workers of this pool on this cluster: what the DGD component's `replicas` says."""
        return self.replicas * self.workers_per_replica

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [k for k in env if not _ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"invalid environment variable names: {', '.join(sorted(bad))}")
        return env


class RolloutSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workload_id: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    revision: int = Field(default=0, ge=0, description="which version of the workload on this cluster: an "
                          "upgrade brings revision n+1 up beside n, each its own DGD")
    artifact_id: str = Field(min_length=1)
    artifact_sha: str = Field(description="the Hugging Face commit the artifact pins (40 hex)")
    draft_version: int = Field(ge=1)
    served_model_name: str = Field(min_length=1)
    hf_model_id: str = Field(min_length=3, pattern=r"^[^/\s]+/[^/\s]+$")
    hf_revision: str | None = Field(default=None, description="commit sha the engine downloads")
    engine: Engine = Engine.vllm
    layout: Layout = Layout.single_node_tp
    hardware_id: str
    worker: WorkerPool = Field(description="the aggregated worker; the decode pool for pd_cluster")
    prefill: WorkerPool | None = Field(default=None, description="the prefill pool, pd_cluster only")
    max_num_seqs: int | None = Field(default=None, ge=1, description="the applied --max-num-seqs")
    max_num_seqs_source: str = Field(
        default="engine default", min_length=1,
        description="where the applied --max-num-seqs came from, e.g. the Dynamo recipe path")
    env: dict[str, str] = Field(default_factory=dict, description="env for every engine worker")
    image: str = Field(min_length=1)
    runtime_version: str | None = Field(
        default=None, pattern=r"^\d+\.\d+\.\d+$",
        description="Dynamo runtime version of the image, needed when its tag does not start with one")
    namespace: str = "default"
    hf_token_secret: str | None = Field(
        default=None, description="name of a Secret in the namespace holding the Hugging Face token")
    hf_token_secret_key: str = "HF_TOKEN"
    model_cache_pvc: str | None = Field(default=None, description="PersistentVolumeClaim for the model cache")
    shared_memory: str = "80Gi"
    frontend_replicas: int = Field(default=1, ge=1)

    @field_validator("artifact_sha", "hf_revision")
    @classmethod
    def _sha(cls, value: str | None) -> str | None:
        if value is not None and not _SHA.match(value):
            raise ValueError(f"{value!r} is not a 40-character lower-case hex commit sha")
        return value

    @field_validator("namespace", "hf_token_secret", "model_cache_pvc")
    @classmethod
    def _k8s_name(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > 63 or not _K8S_NAME.match(value)):
            raise ValueError(f"{value!r} is not a valid Kubernetes name (DNS-1123 label)")
        return value

    @field_validator("hardware_id")
    @classmethod
    def _placeable(cls, value: str) -> str:
        product_label_for(value)  # raises for unknown or non-NVIDIA cards
        return value.lower()

    @model_validator(mode="after")
    def _shape(self) -> RolloutSpec:
        card = get_hardware(self.hardware_id)
        pools = [("worker", self.worker)] + ([("prefill", self.prefill)] if self.prefill else [])
        for role, pool in pools:
            if pool.gpus_per_node > card.gpus_per_node:
                raise ValueError(
                    f"{role} asks for {pool.gpus_per_node} GPUs per node but a {card.display_name} "
                    f"node has {card.gpus_per_node}")
        if self.layout is Layout.pd_cluster:
            if self.prefill is None:
                raise ValueError("layout pd_cluster needs a prefill pool as well as the decode worker")
        elif self.prefill is not None:
            raise ValueError(f"a prefill pool is only valid for pd_cluster, not {self.layout}")
        if self.layout is Layout.single_node_tp and self.worker.nodes != 1:
            raise ValueError(f"single_node_tp runs on one node, not {self.worker.nodes}")
        if self.layout.multi_node and self.worker.nodes < 2:
            raise ValueError(f"{self.layout} spans at least 2 nodes per replica, got {self.worker.nodes}")
        for name in self.env:
            if not _ENV_NAME.match(name):
                raise ValueError(f"invalid environment variable name {name!r}")
        return self

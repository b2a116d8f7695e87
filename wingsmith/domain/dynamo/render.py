"""Render a rollout as an `nvidia.com/v1beta1` DynamoGraphDeployment (a plain dict, ready to apply).

Pure: the same RolloutSpec always gives the same manifest, so a re-applied rollout is a no-op for
the API server. The shape follows Dynamo's v1beta1 recipes: a `components` list with one frontend
and one worker component (prefill and decode components for pd_cluster), each with a `podTemplate`
whose container named `main` runs the engine; multi-node replicas use `multinode.nodeCount` with
one pod per node, so nodes x GPUs per pod must equal the GPUs the engine arguments ask for.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from wingsmith.domain.dynamo import engine_args as ea
from wingsmith.domain.dynamo import names
from wingsmith.domain.dynamo.ranks import ranks_problem
from wingsmith.domain.dynamo.rollout_spec import Engine, Layout, RolloutSpec, WorkerPool
from wingsmith.domain.hardware import product_label_for

API_VERSION = "nvidia.com/v1beta1"
KIND = "DynamoGraphDeployment"
GROUP, VERSION, PLURAL = "nvidia.com", "v1beta1", "dynamographdeployments"

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
MODEL_CACHE_VOLUME = "model-cache"
MODEL_CACHE_MOUNT = "/model-cache"
FRONTEND_PORT = 8000
# Tokens travel only as secret references; a literal one in the env would land in the manifest.
_TOKEN_ENV_NAMES = {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN"}
_SEMVER_TAG = re.compile(r"^v?(\d+\.\d+\.\d+)")


# What the plane applied, so drift is visible from the object alone: a spec edited outside the
# plane no longer hashes to it, and an object applied by another renderer carries another one.
SPEC_HASH_ANNOTATION = f"{names.DOMAIN}/spec-hash"


def spec_hash(spec: dict[str, Any]) -> str:
    """A stable digest of a DGD's `spec` (key order does not matter)."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


class RenderError(ValueError):
    """The rollout cannot be expressed as a valid DynamoGraphDeployment; the message says why."""


def render_dgd(spec: RolloutSpec) -> dict[str, Any]:
    name = names.dgd_name(spec.workload_id, spec.cluster, spec.revision)
    runtime_version = _runtime_version(spec)
    if spec.layout is Layout.pd_cluster:
        assert spec.prefill is not None  # RolloutSpec guarantees it for pd_cluster
        workers = [_worker(spec, spec.prefill, "PrefillWorker", "prefill"),
                   _worker(spec, spec.worker, "DecodeWorker", "decode")]
    else:
        workers = [_worker(spec, spec.worker, "Worker", "worker")]
    components = [_frontend(spec), *workers]
    if runtime_version:
        for component in components:
            component["runtimeVersionOverride"] = runtime_version
    links = link_labels(spec)
    body = {
        "backendFramework": spec.engine.value,
        # Propagated by the operator to every child (pods included), so pods name their workload.
        "labels": links,
        "components": components,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "labels": {names.LABEL_MANAGED_BY: "wingsmith", names.LABEL_NAME: name, **links},
            "annotations": {**link_annotations(spec), SPEC_HASH_ANNOTATION: spec_hash(body)},
        },
        "spec": body,
    }


def link_labels(spec: RolloutSpec) -> dict[str, str]:
    return {
        names.LABEL_WORKLOAD: names.label_value(spec.workload_id),
        names.LABEL_CLUSTER: names.label_value(spec.cluster),
        names.LABEL_ARTIFACT_SHA: spec.artifact_sha,
        names.LABEL_DRAFT_VERSION: str(spec.draft_version),
    }


def link_annotations(spec: RolloutSpec) -> dict[str, str]:
    """The exact ids (labels may be rewritten to fit label syntax) and the serving decisions."""
    d = names.DOMAIN
    notes = {
        f"{d}/workload-id": spec.workload_id,
        f"{d}/cluster": spec.cluster,
        f"{d}/artifact-id": spec.artifact_id,
        f"{d}/artifact-sha": spec.artifact_sha,
        f"{d}/draft-version": str(spec.draft_version),
        f"{d}/hf-model": spec.hf_model_id,
        f"{d}/served-model-name": spec.served_model_name,
        f"{d}/engine": spec.engine.value,
        f"{d}/layout": spec.layout.value,
        f"{d}/hardware": spec.hardware_id,
        f"{d}/max-num-seqs": str(spec.max_num_seqs) if spec.max_num_seqs else "engine default",
        f"{d}/max-num-seqs-source": spec.max_num_seqs_source,
    }
    if spec.hf_revision:
        notes[f"{d}/hf-revision"] = spec.hf_revision
    if spec.revision:
        notes[names.ANNOTATION_REVISION] = str(spec.revision)
    return notes


def worker_args(spec: RolloutSpec, pool: WorkerPool, role: str) -> list[str]:
    """The pool's engine arguments with the identity flags the plane owns filled in and checked."""
    try:
        return _worker_args(spec, pool, role)
    except RenderError:
        raise
    except ValueError as exc:  # malformed flags found while reading the arguments
        raise RenderError(f"{role} arguments: {exc}") from None


def _worker_args(spec: RolloutSpec, pool: WorkerPool, role: str) -> list[str]:
    args = _engine_args(spec, list(pool.args), role)
    _own(args, ea.MODEL_FLAGS[spec.engine], spec.hf_model_id, "artifact's model", role, first=True)
    _own(args, ea.SERVED_NAME_FLAGS, spec.served_model_name, "served model name", role)
    if spec.hf_revision:
        _own(args, ea.REVISION_FLAGS[spec.engine], spec.hf_revision, "artifact's revision", role)
    if role in ("worker", "decode"):
        _own_max_num_seqs(spec, args, role)
    if role in ("prefill", "decode") and spec.engine in (Engine.vllm, Engine.sglang):
        _own(args, ("--disaggregation-mode",), role, "pool's role", role)
    if problem := ranks_problem(spec.engine, args, gpus_per_node=pool.gpus_per_node, nodes=pool.nodes):
        raise RenderError(f"{role} arguments: {problem}")
    return args


def _engine_args(spec: RolloutSpec, args: list[str], role: str) -> list[str]:
    """The pool's arguments as the engine's Dynamo worker takes them."""
    if args and args[:2] == ["vllm", "serve"] and spec.engine is Engine.vllm:
        # A plain `vllm serve MODEL ...` line: Dynamo's worker takes the model as a flag instead.
        if len(args) < 3 or args[2].startswith("-"):
            raise RenderError("`vllm serve` arguments are missing the model")
        args = ["--model", args[2], *args[3:]]
    if args and not args[0].startswith("-"):
        raise RenderError(f"{role} arguments must start with a flag, got {args[0]!r}")
    if spec.engine is Engine.vllm:
        return ea.dynamo_vllm_args(args)
    if spec.engine is Engine.sglang:
        # Per-node rendezvous is the operator's job on multi-node replicas.
        return ea.drop_flags(args, ("--nnodes", "--node-rank", "--dist-init-addr"), ())
    return args


def _own(args: list[str], flags: tuple[str, ...], value: str, what: str, role: str, *, first: bool = False) -> None:
    """Set a flag the plane owns (in place), or refuse arguments that already set it otherwise."""
    if not flags:
        return
    current = ea.flag_value(args, flags)
    if current is None:
        args[:0] = [flags[0], value] if first else []
        if not first:
            args.extend([flags[0], value])
    elif current != value:
        raise RenderError(f"{role} arguments set {flags[0]} {current!r} but the {what} is {value!r}")


def _own_max_num_seqs(spec: RolloutSpec, args: list[str], role: str) -> None:
    seq_flags = ea.MAX_NUM_SEQS_FLAGS[spec.engine]
    if spec.max_num_seqs is not None:
        _own(args, seq_flags, str(spec.max_num_seqs), "applied max-num-seqs", role)
    elif (stated := ea.flag_value(args, seq_flags)) is not None:
        # The draft names the value serving uses; an unnamed one in the args would hide it.
        raise RenderError(f"{role} arguments set {seq_flags[0]} {stated} but the rollout names no "
                          "applied max_num_seqs; set max_num_seqs and max_num_seqs_source")


def _runtime_version(spec: RolloutSpec) -> str | None:
    if spec.runtime_version:
        return spec.runtime_version
    last = spec.image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last and "@" not in last else ""
    if _SEMVER_TAG.match(tag):
        return None  # the operator reads the version from the tag itself
    raise RenderError(
        f"image {spec.image!r} has no Dynamo version tag (MAJOR.MINOR.PATCH); set runtime_version")


def _model_env(spec: RolloutSpec) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    if spec.model_cache_pvc:
        env.append({"name": "HF_HOME", "value": MODEL_CACHE_MOUNT})
    if spec.hf_token_secret:
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": spec.hf_token_secret, "key": spec.hf_token_secret_key}}})
    return env


def _env(spec: RolloutSpec, pool: WorkerPool | None) -> list[dict[str, Any]]:
    merged = {**spec.env, **(pool.env if pool else {})}
    literal_tokens = _TOKEN_ENV_NAMES & set(merged)
    if literal_tokens:
        raise RenderError(
            f"env sets {', '.join(sorted(literal_tokens))} directly; name a secret in hf_token_secret")
    fixed = _model_env(spec)
    taken = {e["name"] for e in fixed}
    return fixed + [{"name": k, "value": merged[k]} for k in sorted(merged) if k not in taken]


def _volumes(spec: RolloutSpec) -> tuple[list[dict], list[dict]]:
    if not spec.model_cache_pvc:
        return [], []
    return ([{"name": MODEL_CACHE_VOLUME, "persistentVolumeClaim": {"claimName": spec.model_cache_pvc}}],
            [{"name": MODEL_CACHE_VOLUME, "mountPath": MODEL_CACHE_MOUNT}])


def _frontend(spec: RolloutSpec) -> dict[str, Any]:
    volumes, mounts = _volumes(spec)
    container: dict[str, Any] = {
        "name": "main",
        "image": spec.image,
        "command": ["python3", "-m", "dynamo.frontend"],
        "args": ["--http-port", str(FRONTEND_PORT)],
        "env": _model_env(spec),
    }
    if mounts:
        container["volumeMounts"] = mounts
    pod: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod["volumes"] = volumes
    return {"name": "Frontend", "type": "frontend", "replicas": spec.frontend_replicas,
            "podTemplate": {"spec": pod}}


def _worker(spec: RolloutSpec, pool: WorkerPool, component: str, role: str) -> dict[str, Any]:
    volumes, mounts = _volumes(spec)
    gpus = str(pool.gpus_per_node)
    container: dict[str, Any] = {
        "name": "main",
        "image": spec.image,
        "command": ["python3", "-m", f"dynamo.{spec.engine.value}"],
        "args": worker_args(spec, pool, role),
        "env": _env(spec, pool),
        "resources": {"limits": {GPU_RESOURCE: gpus}, "requests": {GPU_RESOURCE: gpus}},
    }
    if mounts:
        container["volumeMounts"] = mounts
    pod: dict[str, Any] = {
        "containers": [container],
        "nodeSelector": {GPU_PRODUCT_LABEL: product_label_for(spec.hardware_id)},
    }
    if volumes:
        pod["volumes"] = volumes
    template: dict[str, Any] = {"spec": pod}
    out: dict[str, Any] = {"name": component, "type": role, "replicas": pool.workers}
    if pool.nodes > 1:
        out["multinode"] = {"nodeCount": pool.nodes}
        if spec.engine is Engine.vllm:
            # vLLM's multiprocessing executor spans the nodes, as the strategies assume
            # (--nnodes/--node-rank/--headless), instead of a Ray cluster.
            template["metadata"] = {"annotations": {
                "nvidia.com/vllm-distributed-executor-backend": "mp"}}
    out["sharedMemorySize"] = spec.shared_memory
    out["podTemplate"] = template
    return out

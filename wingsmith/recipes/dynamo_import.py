"""Read NVIDIA Dynamo recipes (`recipes/<model>/<backend>/<mode>/deploy.yaml`) into catalog entries.

A deploy.yaml may hold several YAML documents (ConfigMaps, ComputeDomains) before or after the
DynamoGraphDeployment; both the v1alpha1 (`services` map) and v1beta1 (`components` list) shapes
occur. Worker arguments may be an argv list or one shell script string."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from wingsmith.hardware import HARDWARE, hardware_for_product_label
from wingsmith.recipes.models import DynamoEntry, DynamoWorker, MaxConcurrency
from wingsmith.recipes.problems import BadField, ImportProblem

_BACKENDS = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "tensorrtllm": "trtllm"}
# The engine setting that caps concurrent sequences, per backend.
CONCURRENCY_SETTING = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "trtllm": "max_batch_size"}
_PRODUCT_KEY = "nvidia.com/gpu.product"


def _argv(container: dict) -> list[str]:
    """The container's command line as tokens, with shell scripts split the way the shell would."""
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    tokens = command + args
    if any(c in ("-c", "-lc") for c in command) or (len(args) == 1 and " " in args[0]):
        script = " ".join(args).replace("\\\n", " ")
        try:
            return [t for t in shlex.split(script, comments=True) if t != "exec"]
        except ValueError:
            return script.split()
    return tokens


def flag_value(argv: list[str], *flags: str) -> str | None:
    """Value of the last `--flag value` / `--flag=value` among flags (last wins, as argparse does)."""
    found = None
    for i, token in enumerate(argv):
        name, eq, value = token.partition("=")
        if name in flags:
            if eq:
                found = value
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                found = argv[i + 1]
    return found


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in container.get("env") or []
            if isinstance(e, dict) and "name" in e and "value" in e}


def _expand(value: str | None, env: dict[str, str]) -> str | None:
    if value is None:
        return None
    return re.sub(r"\$\{?(\w+)\}?|\$\((\w+)\)", lambda m: env.get(m.group(1) or m.group(2), m.group(0)), value)


def _int(value: Any, field: str) -> int | None:
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        raise BadField(field, f"expected a whole number, got {value!r}") from None


def _product_labels(pod_spec: dict) -> list[str]:
    labels = []
    selector = (pod_spec.get("nodeSelector") or {}).get(_PRODUCT_KEY)
    if selector:
        labels.append(str(selector))
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in affinity.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == _PRODUCT_KEY:
                labels.extend(str(v) for v in expr.get("values") or [])
    return labels


class _Component:
    """One DGD component in either API version, reduced to what the catalog needs."""

    def __init__(self, name: str, kind: str, sub: str | None, replicas: Any, nodes: Any, gpus: Any,
                 container: dict, pod_spec: dict, field: str):
        self.name, self.kind, self.sub, self.field = name, (kind or "").lower(), (sub or "").lower() or None, field
        self.replicas = _int(replicas, f"{field}.replicas") or 1
        self.nodes = _int(nodes, f"{field}.multinode.nodeCount") or 1
        self.gpus = _int(gpus, f"{field}.resources.limits.gpu")
        self.container, self.pod_spec = container, pod_spec

    @property
    def role(self) -> str | None:
        if self.kind in ("frontend", "epp", "planner", "router"):
            return None
        if "prefill" in (self.sub or self.kind or ""):
            return "prefill"
        if "decode" in (self.sub or self.kind or ""):
            return "decode"
        return "worker" if self.kind in ("worker", "main", "") else None


def _components(dgd: dict) -> list[_Component]:
    spec = dgd.get("spec") or {}
    out = []
    if isinstance(spec.get("components"), list):  # v1beta1
        for i, comp in enumerate(spec["components"]):
            pod = ((comp.get("podTemplate") or {}).get("spec")) or {}
            containers = pod.get("containers") or [{}]
            main = next((c for c in containers if c.get("name") == "main"), containers[0])
            limits = ((main.get("resources") or {}).get("limits") or {})
            out.append(_Component(comp.get("name", f"#{i}"), comp.get("type", ""), comp.get("subComponentType"),
                                  comp.get("replicas"), (comp.get("multinode") or {}).get("nodeCount"),
                                  limits.get("nvidia.com/gpu"), main, pod, f"spec.components[{i}]"))
    elif isinstance(spec.get("services"), dict):  # v1alpha1
        for name, svc in spec["services"].items():
            extra = svc.get("extraPodSpec") or {}
            limits = ((svc.get("resources") or {}).get("limits") or {})
            container = dict(extra.get("mainContainer") or {})
            container["env"] = list(spec.get("envs") or []) + list(svc.get("envs") or []) + list(container.get("env") or [])
            out.append(_Component(name, svc.get("componentType", ""), svc.get("subComponentType"), svc.get("replicas"),
                                  (svc.get("multinode") or {}).get("nodeCount"), limits.get("gpu"), container, extra,
                                  f"spec.services.{name}"))
    else:
        raise BadField("spec.components", "neither a components list (v1beta1) nor a services map (v1alpha1)")
    return out


def _engine_config(argv: list[str], config_maps: dict[str, Any]) -> dict:
    """TensorRT-LLM reads its engine settings from a file, usually mounted from a ConfigMap."""
    path = flag_value(argv, "--extra-engine-args", "--extra-engine-args-path")
    if not path:
        return {}
    value = config_maps.get(Path(path).name)
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def read_deploy(path: Path, root: Path) -> list[DynamoEntry]:
    rel = path.relative_to(root).as_posix()
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BadField(f"line {mark.line + 1}" if mark else "(document)", "not valid YAML") from None
    config_maps: dict[str, Any] = {}
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            config_maps.update(doc.get("data") or {})
    dgds = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DynamoGraphDeployment"]
    if not dgds:
        raise BadField("kind", "no DynamoGraphDeployment document in the file")
    parts = path.relative_to(root / "recipes").parts[:-1]
    backend_dir = next((p for p in parts if p in _BACKENDS), None)
    entries = []
    for dgd in dgds:
        framework = (dgd.get("spec") or {}).get("backendFramework") or backend_dir
        backend = _BACKENDS.get(str(framework).lower()) if framework else None
        if backend is None:
            raise BadField("spec.backendFramework", f"unknown backend {framework!r} and none in the directory name")
        workers = [c for c in _components(dgd) if c.role]
        if not workers:
            raise BadField("spec.components", "no worker component")
        setting = CONCURRENCY_SETTING[backend]
        model_ids: list[str] = []
        built: list[DynamoWorker] = []
        labels: list[str] = []
        for comp in workers:
            argv, env = _argv(comp.container), _env(comp.container)
            for flag in ("--model", "--model-path", "--served-model-name"):
                value = _expand(flag_value(argv, flag), env)
                if value and "/" in value and not value.startswith(("/", "$")) and value not in model_ids:
                    model_ids.append(value)
            if env.get("SERVED_MODEL_NAME") and env["SERVED_MODEL_NAME"] not in model_ids:
                model_ids.append(env["SERVED_MODEL_NAME"])
            labels.extend(_product_labels(comp.pod_spec))
            engine = _engine_config(argv, config_maps)
            if backend == "trtllm":
                cap = engine.get("max_batch_size")
                tp = engine.get("tensor_parallel_size")
            else:
                cap = flag_value(argv, setting)
                tp = flag_value(argv, "--tensor-parallel-size", "--tp", "--tp-size")
            role = "aggregated" if comp.role == "worker" else comp.role
            built.append(DynamoWorker(
                name=comp.name, role=role, gpus=comp.gpus, nodes=comp.nodes, replicas=comp.replicas,
                tensor_parallel_size=_int(tp, f"{comp.field}.args.tensor-parallel-size"),
                max_concurrency=MaxConcurrency(setting=setting, value=_int(cap, f"{comp.field}.args.{setting}"))))
        disaggregated = any(w.role == "prefill" for w in built) or any(p.startswith("disagg") for p in parts)
        # The serving worker (decode in a disaggregated graph) is the one whose concurrency limits clients.
        main = next((w for w in built if w.role == "decode"), built[0])
        card, card_label, card_source = None, None, None
        if labels:
            card_label = labels[0]
            hw = hardware_for_product_label(card_label)
            card, card_source = (hw.id if hw else None), "node selector"
        else:
            for part in reversed(parts):
                tokens = re.split(r"[-_]", part.lower())
                hit = next((t for t in tokens if t in HARDWARE), None)
                if hit:
                    card, card_source = hit, "directory name"
                    break
        entries.append(DynamoEntry(
            source_path=rel, model="/".join(parts[:parts.index(backend_dir)]) if backend_dir else parts[0],
            model_ids=model_ids, backend=backend, mode="disaggregated" if disaggregated else "aggregated",
            card=card, card_label=card_label, card_source=card_source, gpus_per_worker=main.gpus,
            nodes=main.nodes, replicas=main.replicas, tensor_parallel_size=main.tensor_parallel_size,
            max_concurrency=main.max_concurrency, workers=built))
    return entries


def import_dynamo(root: Path) -> tuple[list[DynamoEntry], list[ImportProblem], int]:
    """Entries from every deploy.yaml under recipes/, the problems, and how many files were read."""
    entries: list[DynamoEntry] = []
    problems: list[ImportProblem] = []
    files = sorted((root / "recipes").rglob("deploy.yaml"))
    for path in files:
        try:
            entries.extend(read_deploy(path, root))
        except BadField as exc:
            problems.append(ImportProblem(file=path.relative_to(root).as_posix(), field=exc.field, reason=exc.reason))
        except (AttributeError, TypeError) as exc:
            # A field with the wrong shape somewhere deep in a manifest: still name the file.
            problems.append(ImportProblem(file=path.relative_to(root).as_posix(), field="(manifest)",
                                          reason=f"unexpected shape: {exc}"))
    return entries, problems, len(files)

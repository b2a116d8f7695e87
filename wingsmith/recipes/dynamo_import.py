"""Parse NVIDIA Dynamo recipes (every `recipes/**/*.yaml` that holds a DynamoGraphDeployment) into
catalog entries. Pure: the snapshot comes in as texts (problems.Snapshot), read by
wingsmith/recipes/files.py or fetched by wingsmith/recipes/refresh.py.

A manifest may hold several YAML documents (ConfigMaps, ComputeDomains) before or after the
DynamoGraphDeployment; both the v1alpha1 (`services` map, `envs`) and v1beta1 (`components` list,
`env`) shapes occur. Worker arguments may be an argv list or one shell script string, and may name
their values through the container's env (`--tensor-parallel-size "${TENSOR_PARALLEL_SIZE}"`).
Engines read settings from files too: TensorRT-LLM's `--extra-engine-args` and SGLang's `--config`,
usually mounted from a ConfigMap in the same manifest. Kustomize bases are full manifests; the
patches overlays apply are partial ones and are noted, not read as entries."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath
from typing import Any

import yaml

from wingsmith.hardware import HARDWARE, hardware_for_product_label
from wingsmith.recipes.models import DynamoEntry, DynamoWorker, MaxConcurrency
from wingsmith.recipes.problems import BadField, ImportProblem, PartProblems, Snapshot, Unreadable, path_order
from wingsmith.recipes.vllm_import import SAFE_LOADER

# The files of a snapshot the importer reads: every YAML under recipes/ (DGDs also live in
# deploy-16gpu.yaml, deploy_hopper_16gpu.yaml and kustomize bases, not only in deploy.yaml).
FILES = re.compile(r"recipes/.+\.yaml")
GLOBS = ("recipes/**/*.yaml",)  # the same files, for reading a directory
_BACKENDS = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "tensorrtllm": "trtllm", "tensorrt_llm": "trtllm"}
# The engine setting that caps concurrent sequences, per backend.
CONCURRENCY_SETTING = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "trtllm": "max_batch_size"}
_PRODUCT_KEY = "nvidia.com/gpu.product"
# Flags (and config-file keys) per backend for the tensor-parallel size and the concurrency cap.
_TP_FLAGS = ("--tensor-parallel-size", "--tp", "--tp-size", "--tp_size")
_CAP_FLAGS = {"vllm": ("--max-num-seqs",), "sglang": ("--max-running-requests",),
              "trtllm": ("--max-batch-size", "--max_batch_size")}
_TP_KEYS = ("tensor_parallel_size", "tensor-parallel-size", "tp_size", "tp-size", "tp")
_CAP_KEYS = {"vllm": ("max_num_seqs", "max-num-seqs"), "sglang": ("max_running_requests", "max-running-requests"),
             "trtllm": ("max_batch_size", "max-batch-size")}
# Env vars upstream manifests name the served model with, most specific first.
_MODEL_ENV = ("SERVED_MODEL_NAME", "MODEL_NAME", "MODEL_PATH", "MODEL", "HF_MODEL_ID", "MODEL_ID")
# Keys an engine config file (SGLang's `--config`) names the model with.
_MODEL_KEYS = ("model-path", "model_path", "model", "served-model-name", "served_model_name")


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
            if isinstance(e, dict) and "name" in e and e.get("value") is not None}


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


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _product_labels(pod_spec: dict) -> list[str]:
    labels = []
    selector = _mapping(pod_spec.get("nodeSelector")).get(_PRODUCT_KEY)
    if selector:
        labels.append(str(selector))
    affinity = _mapping(_mapping(_mapping(pod_spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    for term in affinity.get("nodeSelectorTerms") or []:
        for expr in _mapping(term).get("matchExpressions") or []:
            if _mapping(expr).get("key") == _PRODUCT_KEY:
                labels.extend(str(v) for v in expr.get("values") or [])
    return labels


class _Component:
    """One DGD component in either API version, reduced to what the catalog needs."""

    def __init__(self, name: str, kind: str, sub: str | None, replicas: Any, nodes: Any, gpus: Any,
                 container: dict, pod_spec: dict, field: str):
        self.name, self.kind, self.sub, self.field = name, (kind or "").lower(), (sub or "").lower() or None, field
        # `replicas: 0` is a graph that starts scaled to zero (a checkpoint restores it later); it
        # serves with one replica once up, so that is the figure, with a warning.
        self.scaled_to_zero = _int(replicas, f"{field}.replicas") == 0
        self.replicas = _int(replicas, f"{field}.replicas") or 1
        self.nodes = _int(nodes, f"{field}.multinode.nodeCount") or 1
        self.gpus = _int(gpus, f"{field}.resources.limits.gpu")
        self.container, self.pod_spec = container, pod_spec
        self.kind_role: str | None = None  # a role read from the name, set by the caller

    def named_role(self) -> str:
        """The role a worker's name gives (`prefill:`, `EncodeWorker`). Only trusted beside other
        workers: upstream's single aggregated workers are called VllmDecodeWorker or even
        VllmPrefillWorker."""
        name = self.name.lower()
        return next((role for role in ("encode", "prefill", "decode") if role in name), "worker")

    @property
    def role(self) -> str | None:
        if self.kind in ("frontend", "epp", "planner", "router"):
            return None
        # The sub-component type (v1alpha1) or type (v1beta1) says the role. A lone decode worker is
        # still an aggregated graph: the caller decides that from whether a prefill pool exists.
        said = f"{self.sub or ''} {self.kind or ''}"
        for role in ("encode", "prefill", "decode"):
            if role in said:
                return role
        return "worker" if self.kind in ("worker", "main", "") else None


def _main_container(containers: list[dict]) -> dict:
    return next((c for c in containers if c.get("name") == "main"), containers[0] if containers else {})


def _components(dgd: dict) -> list[_Component]:
    spec = dgd.get("spec") or {}
    out = []
    if isinstance(spec.get("components"), list):  # v1beta1: graph-wide env in spec.env
        graph_env = list(spec.get("env") or [])
        for i, comp in enumerate(spec["components"]):
            pod = ((comp.get("podTemplate") or {}).get("spec")) or {}
            main = dict(_main_container(pod.get("containers") or []))
            main["env"] = graph_env + list(comp.get("env") or []) + list(main.get("env") or [])
            limits = ((main.get("resources") or {}).get("limits") or {})
            gpus = limits.get("nvidia.com/gpu", ((comp.get("resources") or {}).get("limits") or {}).get("gpu"))
            out.append(_Component(comp.get("name", f"#{i}"), comp.get("type", comp.get("componentType", "")),
                                  comp.get("subComponentType"), comp.get("replicas"),
                                  (comp.get("multinode") or {}).get("nodeCount"), gpus, main, pod,
                                  f"spec.components[{i}]"))
    elif isinstance(spec.get("services"), dict):  # v1alpha1: graph-wide env in spec.envs
        for name, svc in spec["services"].items():
            extra = svc.get("extraPodSpec") or {}
            limits = ((svc.get("resources") or {}).get("limits") or {})
            container = dict(extra.get("mainContainer") or {})
            container["env"] = (list(spec.get("envs") or []) + list(svc.get("envs") or [])
                                + list(container.get("env") or []))
            out.append(_Component(name, svc.get("componentType", ""), svc.get("subComponentType"), svc.get("replicas"),
                                  (svc.get("multinode") or {}).get("nodeCount"), limits.get("gpu"), container, extra,
                                  f"spec.services.{name}"))
    else:
        raise BadField("spec.components", "neither a components list (v1beta1) nor a services map (v1alpha1)")
    return out


def _config_file(path: str | None, comp: _Component, config_maps: dict[str, dict[str, str]]) -> dict:
    """A config file an engine flag points at, read from the ConfigMap mounted there (by volume and
    mount path), else from any ConfigMap in the manifest holding a key of that file name. An inline
    YAML mapping in place of a path (given through env) is read as is."""
    if not path:
        return {}
    text = None
    if "\n" in path or (":" in path and not path.startswith("/")):
        text = path
    else:
        volumes = {v.get("name"): (v.get("configMap") or {}).get("name") for v in comp.pod_spec.get("volumes") or []
                   if isinstance(v, dict)}
        for mount in comp.container.get("volumeMounts") or []:
            where = str(mount.get("mountPath", "")).rstrip("/")
            data = config_maps.get(volumes.get(mount.get("name")) or "")
            if data is None or not where:
                continue
            if mount.get("subPath") and path == where:
                text = data.get(mount["subPath"])
            elif path.startswith(where + "/"):
                text = data.get(path[len(where) + 1:])
            if text is not None:
                break
        if text is None:
            name = PurePosixPath(path).name
            text = next((d[name] for d in config_maps.values() if name in d), None)
    if not isinstance(text, str):
        return {}
    try:
        parsed = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _first_key(config: dict, keys: tuple[str, ...]) -> Any:
    return next((config[k] for k in keys if config.get(k) is not None), None)


def _worker(comp: _Component, backend: str, config_maps: dict[str, dict[str, str]], parts: PartProblems,
            rel: str) -> tuple[DynamoWorker, list[str], str | None, list[str], bool, tuple[str, str] | None]:
    """The worker, the model names it states (and where the first came from), its card labels, whether
    it runs in an engine's disaggregation mode, and the name it serves as (`--served-model-name`)."""
    env = _env(comp.container)
    raw = _argv(comp.container)
    argv = [_expand(t, env) or t for t in raw]
    # A token with leading whitespace is one the shell or the engine would mangle: an args item from a
    # folded scalar with an indentation indicator, or a folded script whose `\` line continuations
    # became `\ ` (an escaped space glued to the next flag). The engine would not see that flag.
    for token in raw:
        if token != token.lstrip() and token.strip():
            parts.note(f"{comp.field}.args", f"{token!r} starts with whitespace (a folded scalar?): the engine "
                       "receives it as is, not as a flag; read here as if trimmed", scope="warning")
    argv = [t.strip() for t in argv]
    names: list[str] = []
    source = served = None
    for flag in ("--model", "--model-path", "--served-model-name"):
        value = flag_value(argv, flag)
        if value and "/" in value and not value.startswith(("/", "$")):
            var = re.search(r"\$\{?\(?(\w+)", flag_value(raw, flag) or "")
            said = f"{flag} from env {var.group(1)}" if var else flag
            if flag == "--served-model-name":
                served = (value, said)
            if value not in names:
                names.append(value)
                source = source or said
    for key in _MODEL_ENV:
        value = env.get(key)
        if value and "/" in value and not value.startswith("/") and value not in names:
            names.append(value)
            source = source or f"env {key}"
    setting = CONCURRENCY_SETTING[backend]
    config = _config_file(flag_value(argv, "--extra-engine-args", "--extra-engine-args-path", "--config"),
                          comp, config_maps)
    tp = flag_value(argv, *_TP_FLAGS)
    cap = flag_value(argv, *_CAP_FLAGS[backend])
    if tp is None:
        tp = _first_key(config, _TP_KEYS)
    if cap is None:
        cap = _first_key(config, _CAP_KEYS[backend])
    for key in _MODEL_KEYS:
        value = config.get(key)
        if isinstance(value, str) and "/" in value and not value.startswith("/") and value not in names:
            names.append(value)
            source = source or f"config file key {key}"
    if comp.scaled_to_zero:
        parts.note(f"{comp.field}.replicas", "0 (the graph starts scaled to zero): read as 1 replica",
                   scope="warning")
    selector = comp.pod_spec.get("nodeSelector")
    if selector is not None and not isinstance(selector, dict):
        # `nodeSelector: ${HW_NODE_SELECTOR}`: a placeholder a script fills in before applying.
        parts.note(f"{comp.field}.extraPodSpec.nodeSelector", f"{selector!r} is not a mapping (a placeholder "
                   "filled in before apply?): the worker's card is unknown", scope="warning")
    labels = _product_labels(comp.pod_spec)
    card = hardware_for_product_label(labels[0]) if labels else None
    mode = flag_value(argv, "--disaggregation-mode") or ("prefill" if "--is-prefill-worker" in argv else None)
    role = comp.kind_role or comp.role
    if mode in ("prefill", "decode") and role in ("worker", None):
        role = mode
    worker = DynamoWorker(
        name=comp.name, role="aggregated" if role == "worker" else role, gpus=comp.gpus, nodes=comp.nodes,
        replicas=comp.replicas, card=card.id if card else None, card_label=labels[0] if labels else None,
        tensor_parallel_size=_int(tp, f"{comp.field}.args.tensor-parallel-size"),
        max_concurrency=MaxConcurrency(setting=setting, value=_int(cap, f"{comp.field}.args.{setting}")))
    return worker, names, source, labels, mode in ("prefill", "decode"), served


def _card_from_dirs(parts: tuple[str, ...]) -> str | None:
    for part in reversed(parts):
        tokens = re.split(r"[-_.]", part.lower())
        hit = next((t for t in tokens if t in HARDWARE), None)
        if hit:
            return hit
    return None


def parse_deploy(text: str, rel: str, parts: PartProblems | None = None,
                 docs: list[Any] | None = None) -> list[DynamoEntry]:
    """The entries of one manifest (`rel`: its path relative to the snapshot's root, `recipes/...`;
    `docs`: its documents, when the caller has parsed them already)."""
    parts = parts or PartProblems(rel)
    docs = _documents(text) if docs is None else docs
    config_maps: dict[str, dict[str, str]] = {}
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            name = str((doc.get("metadata") or {}).get("name") or f"#{len(config_maps)}")
            config_maps[name] = {str(k): str(v) for k, v in (doc.get("data") or {}).items()}
    dgds = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DynamoGraphDeployment"]
    if not dgds:
        raise BadField("kind", "no DynamoGraphDeployment document in the file")
    path = PurePosixPath(rel)
    dirs = path.relative_to("recipes").parts[:-1]
    backend_dir = next((p for p in dirs if p in _BACKENDS), None)
    folder = "/".join(dirs[:dirs.index(backend_dir)]) if backend_dir else (dirs[0] if dirs else path.stem)
    entries = []
    for i, dgd in enumerate(dgds):
        where = f"(document {i + 1})" if len(dgds) > 1 else ""
        framework = (dgd.get("spec") or {}).get("backendFramework") or backend_dir or _backend_from_commands(dgd)
        backend = _BACKENDS.get(str(framework).lower()) if framework else None
        if backend is None:
            parts.note(f"{where}spec.backendFramework", f"unknown backend {framework!r} and none in the "
                       "directory name or worker command: graph skipped")
            continue
        workers = [c for c in _components(dgd) if c.role]
        if not workers:
            raise BadField(f"{where}spec.components", "no worker component")
        if len(workers) > 1:
            for comp in workers:
                if comp.role == "worker":
                    comp.kind_role = comp.named_role()
        built, model_ids, labels, source, split = [], [], [], None, False
        served: tuple[str, str] | None = None
        for comp in workers:
            worker, names, named_by, comp_labels, disagg_mode, served_as = _worker(comp, backend, config_maps,
                                                                                   parts, rel)
            split = split or disagg_mode
            built.append(worker)
            model_ids += [n for n in names if n not in model_ids]
            source = source or named_by
            served = served or served_as
            labels += comp_labels
        # A lone "decode" worker is how v1beta1 graphs spell an aggregated one; a prefill pool or an
        # engine told --disaggregation-mode (beside an encoder on another card, say) is split serving.
        disaggregated = (split or any(w.role == "prefill" for w in built)
                         or any(p.startswith("disagg") for p in dirs) or path.stem.startswith("disagg"))
        # The serving worker (decode in a disaggregated graph; never an encoder) is the one whose
        # concurrency limits clients, and whose figures the entry carries.
        serving = [w for w in built if w.role != "encode"] or built
        main = next((w for w in serving if w.role == "decode"), serving[0])
        card, card_label, card_source = main.card, main.card_label, "node selector" if main.card_label else None
        if card_label is None and labels:
            card_label = labels[0]
            hw = hardware_for_product_label(card_label)
            card, card_source = (hw.id if hw else None), "node selector"
        if card_label is None:
            card = _card_from_dirs((*dirs, path.stem))
            card_source = "directory name" if card else None
        # Clients ask for the served name; the checkpoint the workers load (often a quantised repo such
        # as nvidia/Kimi-K2.6-NVFP4) stays in model_ids and loaded_model.
        loaded = next((m for m in model_ids if not served or m != served[0]), None)
        if served:
            name, name_source = served
        elif model_ids:
            name, name_source = model_ids[0], source or "--model"
        else:
            name, name_source = folder, "recipe folder"
        if not disaggregated:
            # Upstream labels the one worker of many aggregated graphs `decode`; it does both phases.
            built = [w.model_copy(update={"role": "aggregated"}) if w.role == "decode" else w for w in built]
        entries.append(DynamoEntry(
            source_path=rel, model=folder, model_ids=model_ids, model_name=name, model_name_source=name_source,
            loaded_model=loaded,
            backend=backend, mode="disaggregated" if disaggregated else "aggregated",
            card=card, card_label=card_label, card_source=card_source, gpus_per_worker=main.gpus,
            nodes=main.nodes, replicas=main.replicas, tensor_parallel_size=main.tensor_parallel_size,
            max_concurrency=main.max_concurrency, workers=built))
    return entries


def _documents(text: str) -> list[Any]:
    try:
        return [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BadField(f"line {mark.line + 1}" if mark else "(document)", "not valid YAML") from None


def _backend_from_commands(dgd: dict) -> str | None:
    """`python3 -m dynamo.<backend>` in a worker's command, when nothing else names the backend."""
    try:
        comps = _components(dgd)
    except BadField:
        return None
    for comp in comps:
        for token in _argv(comp.container):
            if token.startswith("dynamo.") and token[7:] in _BACKENDS:
                return token[7:]
    return None


def _is_patch(dgd: dict) -> bool:
    """A kustomize patch: a DGD whose components carry no worker command or resources of their own."""
    try:
        comps = _components(dgd)
    except BadField:
        return False  # not a graph at all: parse_deploy says why
    return not any(c.role and (c.container.get("args") or c.container.get("command") or c.gpus) for c in comps)


def import_dynamo(files: Snapshot) -> tuple[list[DynamoEntry], list[ImportProblem], int]:
    """Entries from every manifest under recipes/ that holds a DynamoGraphDeployment, the problems
    (files and parts), and how many such manifests were read."""
    entries: list[DynamoEntry] = []
    problems: list[ImportProblem] = []
    manifests = 0
    for rel in sorted((p for p in files if FILES.fullmatch(p)), key=path_order):
        text = files[rel]
        if isinstance(text, Unreadable):
            problems.append(ImportProblem(file=rel, field="(file)", reason=text.reason))
            continue
        if "DynamoGraphDeployment" not in text:
            continue  # perf jobs, model caches, routes: not deployments
        parts = PartProblems(rel)
        try:
            docs = _documents(text)
            dgds = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DynamoGraphDeployment"]
            if not dgds:
                continue  # the name appears only in a comment or a script
            if all(_is_patch(d) for d in dgds):
                parts.note("spec", "a kustomize patch (no worker of its own): its base manifest is the entry",
                           scope="warning")
            else:
                manifests += 1
                entries.extend(parse_deploy(text, rel, parts, docs))
        except BadField as exc:
            problems.append(ImportProblem(file=rel, field=exc.field, reason=exc.reason))
        except (AttributeError, TypeError) as exc:
            # A field with the wrong shape somewhere deep in a manifest: still name the file.
            problems.append(ImportProblem(file=rel, field="(manifest)", reason=f"unexpected shape: {exc}"))
        problems.extend(parts.problems)
    return entries, problems, manifests

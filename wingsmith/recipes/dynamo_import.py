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

from wingsmith.hardware import HARDWARE, NVIDIA_HARDWARE, hardware_for_product_label
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
_CARD_KEYS = (_PRODUCT_KEY, "cloud.google.com/gke-accelerator")
_FAMILY_KEY = "nvidia.com/gpu.family"  # GPU feature discovery's generation label (hopper, blackwell)
# Workload kinds that run a model server without Dynamo: such a manifest is reported, not skipped.
_PLAIN_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "LeaderWorkerSet")
# Flags (and config-file keys) per backend for the tensor-parallel size and the concurrency cap.
_TP_FLAGS = ("--tensor-parallel-size", "--tp", "--tp-size", "--tp_size")
_CAP_FLAGS = {"vllm": ("--max-num-seqs",), "sglang": ("--max-running-requests",),
              "trtllm": ("--max-batch-size", "--max_batch_size")}
_TP_KEYS = ("tensor_parallel_size", "tensor-parallel-size", "tp_size", "tp-size", "tp")
_DP_FLAGS = ("--data-parallel-size", "-dp", "--dp", "--dp-size", "--dp_size")
_DP_KEYS = ("data_parallel_size", "data-parallel-size", "dp_size", "dp-size")
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


def _selected(pod_spec: dict, key: str) -> list[str]:
    """The values a pod's node selector and required node affinity give a node label."""
    values = []
    selector = _mapping(pod_spec.get("nodeSelector")).get(key)
    if selector:
        values.append(str(selector))
    affinity = _mapping(_mapping(_mapping(pod_spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    for term in affinity.get("nodeSelectorTerms") or []:
        for expr in _mapping(term).get("matchExpressions") or []:
            if _mapping(expr).get("key") == key:
                values.extend(str(v) for v in expr.get("values") or [])
    return values


def _product_labels(pod_spec: dict) -> list[str]:
    # GKE names the card in its own accelerator label (`nvidia-h100-80gb`), which names the product too.
    return [label for key in _CARD_KEYS for label in _selected(pod_spec, key)]


# A DRA device request naming the GPU model in its CEL selector:
# `device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"`.
_CEL_PRODUCT = re.compile(r"productName\s*==\s*['\"]([^'\"]+)['\"]")


def _claimed_products(comp: _Component, templates: dict[str, dict]) -> list[str]:
    """The GPU products the pod's resource claims select (DRA ResourceClaimTemplates in the same manifest)."""
    names = [str(_mapping(c).get("resourceClaimTemplateName") or "") for c in comp.pod_spec.get("resourceClaims") or []]
    found = []
    for name in names:
        template = templates.get(name)
        if template is None:
            continue
        devices = _mapping(_mapping(_mapping(template.get("spec")).get("spec")).get("devices"))
        for request in devices.get("requests") or []:
            request = _mapping(request)
            blocks = (request, _mapping(request.get("exactly")), *map(_mapping, request.get("firstAvailable") or []))
            for block in blocks:
                for selector in block.get("selectors") or []:
                    found += _CEL_PRODUCT.findall(str(_mapping(_mapping(selector).get("cel")).get("expression") or ""))
    return found


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
    dp = flag_value(argv, *_DP_FLAGS)
    cap = flag_value(argv, *_CAP_FLAGS[backend])
    if tp is None:
        tp = _first_key(config, _TP_KEYS)
    if dp is None:
        dp = _first_key(config, _DP_KEYS)
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
        data_parallel_size=_int(dp, f"{comp.field}.args.data-parallel-size"),
        max_concurrency=MaxConcurrency(setting=setting, value=_int(cap, f"{comp.field}.args.{setting}")))
    return worker, names, source, labels, mode in ("prefill", "decode"), served


# Cloud instance types upstream names its cluster variants by (`deploy-aws-p5.48xlarge.yaml`): their card.
_INSTANCE_CARDS = {"p5.48xlarge": "h100", "p5e.48xlarge": "h200", "p5en.48xlarge": "h200", "p6-b200.48xlarge": "b200"}


def _family_from_dirs(parts: tuple[str, ...]) -> str | None:
    """A GPU generation (`hopper`, `blackwell`) a directory or file name names, when it names no card."""
    families = {h.generation for h in NVIDIA_HARDWARE}
    for part in reversed(parts):
        hit = next((t for t in re.split(r"[-_.]", part.lower()) if t in families), None)
        if hit:
            return hit
    return None


def _card_from_dirs(parts: tuple[str, ...]) -> str | None:
    for part in reversed(parts):
        instance = next((card for name, card in _INSTANCE_CARDS.items() if name in part.lower()), None)
        if instance:
            return instance
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
    templates = {str(_mapping(d.get("metadata")).get("name")): d for d in docs
                 if isinstance(d, dict) and d.get("kind") == "ResourceClaimTemplate"}
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
        built, model_ids, labels, claimed, families, source, split = [], [], [], [], [], None, False
        served: tuple[str, str] | None = None
        for comp in workers:
            worker, names, named_by, comp_labels, disagg_mode, served_as = _worker(comp, backend, config_maps,
                                                                                   parts, rel)
            products = _claimed_products(comp, templates)
            claimed += products
            families += [f.lower() for f in _selected(comp.pod_spec, _FAMILY_KEY)]
            if worker.card is None and products and (hw := hardware_for_product_label(products[0])):
                worker = worker.model_copy(update={"card": hw.id, "card_label": products[0]})
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
        card_source: str | None = None
        card, card_label = main.card, main.card_label
        if card_label is not None:
            card_source = "resource claim" if card_label in claimed and card_label not in labels else "node selector"
        elif labels or claimed:
            card_label = (labels or claimed)[0]
            hw = hardware_for_product_label(card_label)
            card, card_source = (hw.id if hw else None), "node selector" if labels else "resource claim"
        if card_label is None:
            card = _card_from_dirs((*dirs, path.stem))
            card_source = "directory name" if card else None
        family = None
        if card is None:
            family = next(iter(families), None) or _family_from_dirs((*dirs, path.stem))
            if family is not None and card_source is None:
                card_source = "node selector" if families else "directory name"
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
            card=card, card_label=card_label, card_source=card_source, card_family=family,
            family_cards=[h.id for h in NVIDIA_HARDWARE if family and h.generation == family],
            gpus_per_worker=main.gpus,
            nodes=main.nodes, replicas=main.replicas, tensor_parallel_size=main.tensor_parallel_size,
            max_concurrency=main.max_concurrency, workers=built))
    return entries


def _documents(text: str) -> list[Any]:
    try:
        return [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BadField(f"line {mark.line + 1}" if mark else "(document)", "not valid YAML") from None


def _plain_workloads(text: str) -> list[str]:
    """`Kind/name` of each workload that runs pods itself (a Deployment and the like) in a manifest."""
    if not re.search(rf"^kind:\s*({'|'.join(_PLAIN_WORKLOADS)})\s*$", text, re.MULTILINE):
        return []
    try:
        docs = _documents(text)
    except BadField:
        return []
    return [f"{d['kind']}/{_mapping(d.get('metadata')).get('name', '?')}" for d in docs
            if isinstance(d, dict) and d.get("kind") in _PLAIN_WORKLOADS]


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
            if plain := _plain_workloads(text):
                # A model served without Dynamo (a `vllm serve` Deployment beside the graphs): said, not skipped.
                problems.append(ImportProblem(
                    file=rel, field="kind", reason=f"deploys plain {', '.join(plain)} (no DynamoGraphDeployment): "
                    "not a Dynamo recipe entry"))
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

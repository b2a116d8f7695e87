"""The components of a DynamoGraphDeployment in either API version, and what their containers and pods
say: the command line (an argv list or one shell script), the env, the node labels they select, the
GPUs their resource claims ask for, and the engine config files mounted from ConfigMaps. Pure; the
importer (dynamo_import.py) and the worker reader (dynamo_worker.py) build on it."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

import yaml

from wingsmith.domain.recipes.problems import BadField
from wingsmith.domain.recipes.vllm_import import SAFE_LOADER

_PRODUCT_KEY = "nvidia.com/gpu.product"
_CARD_KEYS = (_PRODUCT_KEY, "cloud.google.com/gke-accelerator")


def argv(container: dict) -> list[str]:
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


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in container.get("env") or []
            if isinstance(e, dict) and "name" in e and e.get("value") is not None}


def expand(value: str | None, env: dict[str, str]) -> str | None:
    if value is None:
        return None
    return re.sub(r"\$\{?(\w+)\}?|\$\((\w+)\)", lambda m: env.get(m.group(1) or m.group(2), m.group(0)), value)


def whole_number(value: Any, field: str) -> int | None:
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        raise BadField(field, f"expected a whole number, got {value!r}") from None


def mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def selected(pod_spec: dict, key: str) -> list[str]:
    """The values a pod's node selector and required node affinity give a node label."""
    values = []
    selector = mapping(pod_spec.get("nodeSelector")).get(key)
    if selector:
        values.append(str(selector))
    affinity = mapping(mapping(mapping(pod_spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    for term in affinity.get("nodeSelectorTerms") or []:
        for expr in mapping(term).get("matchExpressions") or []:
            if mapping(expr).get("key") == key:
                values.extend(str(v) for v in expr.get("values") or [])
    return values


def product_labels(pod_spec: dict) -> list[str]:
    # GKE names the card in its own accelerator label (`nvidia-h100-80gb`), which names the product too.
    return [label for key in _CARD_KEYS for label in selected(pod_spec, key)]


# A DRA device request naming the GPU model in its CEL selector:
# `device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"`.
_CEL_PRODUCT = re.compile(r"productName\s*==\s*['\"]([^'\"]+)['\"]")


def claimed_products(comp: Component, templates: dict[str, dict]) -> list[str]:
    """The GPU products the pod's resource claims select (DRA ResourceClaimTemplates in the same manifest)."""
    names = [str(mapping(c).get("resourceClaimTemplateName") or "") for c in comp.pod_spec.get("resourceClaims") or []]
    found = []
    for name in names:
        template = templates.get(name)
        if template is None:
            continue
        devices = mapping(mapping(mapping(template.get("spec")).get("spec")).get("devices"))
        for request in devices.get("requests") or []:
            request = mapping(request)
            blocks = (request, mapping(request.get("exactly")), *map(mapping, request.get("firstAvailable") or []))
            for block in blocks:
                for selector in block.get("selectors") or []:
                    found += _CEL_PRODUCT.findall(str(mapping(mapping(selector).get("cel")).get("expression") or ""))
    return found


class Component:
    """One DGD component in either API version, reduced to what the catalog needs."""

    def __init__(self, name: str, kind: str, sub: str | None, replicas: Any, nodes: Any, gpus: Any,
                 container: dict, pod_spec: dict, field: str):
        self.name, self.kind, self.sub, self.field = name, (kind or "").lower(), (sub or "").lower() or None, field
        # `replicas: 0` is a graph that starts scaled to zero (a checkpoint restores it later); it
        # serves with one replica once up, so that is the figure, with a warning.
        self.scaled_to_zero = whole_number(replicas, f"{field}.replicas") == 0
        self.replicas = whole_number(replicas, f"{field}.replicas") or 1
        self.nodes = whole_number(nodes, f"{field}.multinode.nodeCount") or 1
        self.gpus = whole_number(gpus, f"{field}.resources.limits.gpu")
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


def v1beta1_components(spec: dict) -> list[Component]:
    """`spec.components`: a list, graph-wide env in `spec.env`, the pod in each `podTemplate`."""
    graph_env = list(spec.get("env") or [])
    out = []
    for i, comp in enumerate(spec["components"]):
        pod = ((comp.get("podTemplate") or {}).get("spec")) or {}
        main = dict(_main_container(pod.get("containers") or []))
        main["env"] = graph_env + list(comp.get("env") or []) + list(main.get("env") or [])
        limits = ((main.get("resources") or {}).get("limits") or {})
        gpus = limits.get("nvidia.com/gpu", ((comp.get("resources") or {}).get("limits") or {}).get("gpu"))
        out.append(Component(comp.get("name", f"#{i}"), comp.get("type", comp.get("componentType", "")),
                             comp.get("subComponentType"), comp.get("replicas"),
                             (comp.get("multinode") or {}).get("nodeCount"), gpus, main, pod,
                             f"spec.components[{i}]"))
    return out


def v1alpha1_components(spec: dict) -> list[Component]:
    """`spec.services`: a map by name, graph-wide env in `spec.envs`, the pod in each `extraPodSpec`."""
    out = []
    for name, svc in spec["services"].items():
        extra = svc.get("extraPodSpec") or {}
        limits = ((svc.get("resources") or {}).get("limits") or {})
        container = dict(extra.get("mainContainer") or {})
        container["env"] = (list(spec.get("envs") or []) + list(svc.get("envs") or [])
                            + list(container.get("env") or []))
        out.append(Component(name, svc.get("componentType", ""), svc.get("subComponentType"), svc.get("replicas"),
                             (svc.get("multinode") or {}).get("nodeCount"), limits.get("gpu"), container, extra,
                             f"spec.services.{name}"))
    return out


# The block of `spec` that lists a graph's components, per API version: its type, and its reader.
_COMPONENT_BLOCKS: dict[str, tuple[type, Callable[[dict], list[Component]]]] = {
    "components": (list, v1beta1_components), "services": (dict, v1alpha1_components)}


def components(dgd: dict) -> list[Component]:
    spec = dgd.get("spec") or {}
    for block, (shape, read) in _COMPONENT_BLOCKS.items():
        if isinstance(spec.get(block), shape):
            return read(spec)
    raise BadField("spec.components", "neither a components list (v1beta1) nor a services map (v1alpha1)")


def _mounted_text(path: str, comp: Component, config_maps: dict[str, dict[str, str]]) -> str | None:
    """The text of the ConfigMap key mounted at `path` (by volume and mount path), else of any
    ConfigMap in the manifest holding a key of that file name."""
    volumes = {v.get("name"): (v.get("configMap") or {}).get("name") for v in comp.pod_spec.get("volumes") or []
               if isinstance(v, dict)}
    for mount in comp.container.get("volumeMounts") or []:
        where = str(mount.get("mountPath", "")).rstrip("/")
        data = config_maps.get(volumes.get(mount.get("name")) or "")
        if data is None or not where:
            continue
        text = None
        if mount.get("subPath") and path == where:
            text = data.get(mount["subPath"])
        elif path.startswith(where + "/"):
            text = data.get(path[len(where) + 1:])
        if text is not None:
            return text
    name = PurePosixPath(path).name
    return next((d[name] for d in config_maps.values() if name in d), None)


def config_file(path: str | None, comp: Component, config_maps: dict[str, dict[str, str]]) -> dict:
    """A config file an engine flag points at, read from the ConfigMap mounted there. An inline YAML
    mapping in place of a path (given through env) is read as is."""
    if not path:
        return {}
    inline = "\n" in path or (":" in path and not path.startswith("/"))
    text = path if inline else _mounted_text(path, comp, config_maps)
    if not isinstance(text, str):
        return {}
    try:
        parsed = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError:
        return {}
    return parsed if isinstance(parsed, dict) else {}

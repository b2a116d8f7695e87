"""DynamoGraphDeployment conversion between v1alpha1 and v1beta1, as the Dynamo operator's
conversion webhook does it (`api/v1alpha1/dynamographdeployment_conversion.go` upstream): v1beta1
is the hub and the storage version, v1alpha1 a spoke converted on every read and write.

What maps:
- spec: `envs` <-> `env`; the `services` map <-> the `components` list (the map key is the
  component's `name`; listed in name order unless the hub's order was kept, see below);
- per service: `componentType` worker + `subComponentType` prefill/decode <-> `type` prefill/decode;
  `resources` (cpu, memory, gpu, gpuType, custom) <-> the main container's resources (gpu as
  `nvidia.com/gpu` unless `gpuType` names another resource); `extraPodSpec` (a pod spec) with its
  `mainContainer` <-> `podTemplate.spec` with a container named `main`; `extraPodMetadata` <->
  `podTemplate.metadata`; probes and `volumeMounts` (name, mountPoint) <-> the main container's;
  `sharedMemory.size` <-> `sharedMemorySize`; fields both versions name alike pass through;
- status: `services` <-> `components` (v1alpha1 adds `componentName`).

What one version has and the other lacks (v1alpha1's `dynamoNamespace`, `autoscaling`, `ingress`,
`annotations`, `labels`, `envFromSecret`, `pvcs`; v1beta1's `experimental`, a component order that is
not by name) is kept in the annotation `nvidia.com/dgd-spec`, as upstream does, and restored when
the object is read back in the version it came from, so a round trip loses nothing.
"""

from __future__ import annotations

import copy
import json
from typing import Any

HUB, SPOKE = "v1beta1", "v1alpha1"
SAVED = "nvidia.com/dgd-spec"
_MAIN = "main"
_GPU = "nvidia.com/gpu"
_SHARED_SERVICE_FIELDS = ("replicas", "minAvailable", "multinode", "globalDynamoNamespace", "modelRef",
                          "topologyConstraint", "eppConfig", "runtimeVersionOverride", "providerOverride",
                          "scalingAdapter")
_SHARED_SPEC_FIELDS = ("annotations", "backendFramework", "experimental", "labels", "priorityClassName",
                       "providerOverride", "restart", "topologyConstraint")
_SERVICE_MAPPED = (*_SHARED_SERVICE_FIELDS, "componentType", "subComponentType", "serviceName", "resources",
                   "envs", "extraPodSpec", "extraPodMetadata", "livenessProbe", "readinessProbe", "volumeMounts",
                   "sharedMemory")
_COMPONENT_MAPPED = (*_SHARED_SERVICE_FIELDS, "name", "type", "podTemplate", "sharedMemorySize")
_SUB_TYPES = ("prefill", "decode")
_FOLDED_INTO_MAIN = ("envs", "livenessProbe", "readinessProbe", "volumeMounts")
_MAIN_ORIGINS = ("mainContainerResources", "mainContainerName")  # bookkeeping only, never a field


def convert(obj: dict[str, Any], group: str, version: str) -> dict[str, Any]:
    """`obj` (a DGD in either version) in `version`; a copy, the input stays as it was."""
    current = (obj.get("apiVersion") or "").rpartition("/")[2] or HUB
    out = copy.deepcopy(obj)
    if current != version:
        out = _to_hub(out) if current == SPOKE else out
        out = _from_hub(out) if version == SPOKE else out
    out["apiVersion"] = f"{group}/{version}"
    return out


# ---- v1alpha1 -> v1beta1 -----------------------------------------------------------------------

def _to_hub(obj: dict[str, Any]) -> dict[str, Any]:
    saved = _take_saved(obj)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        keep: dict[str, Any] = {}
        obj["spec"] = _spec_to_hub(spec, saved, keep)
        _put_saved(obj, keep)
    status = obj.get("status")
    if isinstance(status, dict) and "services" in status:
        status["components"] = {name: {k: v for k, v in entry.items() if k != "componentName"}
                                for name, entry in (status.pop("services") or {}).items()}
    return obj


def _spec_to_hub(spec: dict[str, Any], saved: dict[str, Any], keep: dict[str, Any]) -> dict[str, Any]:
    out = {k: spec[k] for k in _SHARED_SPEC_FIELDS if k in spec}
    if "envs" in spec:
        out["env"] = spec["envs"]
    if "pvcs" in spec:
        keep["pvcs"] = spec["pvcs"]
    hub_only = saved.get("components") or {}
    services = spec.get("services") or {}
    order = [n for n in saved.get("order") or [] if n in services] or sorted(services)
    order += [n for n in sorted(services) if n not in order]
    components, kept = [], {}
    for name in order:
        component, alpha_only = _service_to_hub(name, services[name] or {})
        component.update({k: v for k, v in (hub_only.get(name) or {}).items() if k not in component})
        components.append(component)
        if alpha_only:
            kept[name] = alpha_only
    if services:
        out["components"] = components
    if kept:
        keep["services"] = kept
    for key in spec.keys() - {*_SHARED_SPEC_FIELDS, "envs", "pvcs", "services"}:
        out[key] = spec[key]  # unknown to both: the schema check reports it
    return out


def _service_to_hub(name: str, service: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    component: dict[str, Any] = {"name": name}
    kind, sub = service.get("componentType"), service.get("subComponentType")
    if kind == "worker" and sub in _SUB_TYPES:
        component["type"] = sub
    elif kind:
        component["type"] = kind
    for key in _SHARED_SERVICE_FIELDS:
        if key in service:
            component[key] = service[key]
    if (service.get("sharedMemory") or {}).get("size") is not None:
        component["sharedMemorySize"] = service["sharedMemory"]["size"]
    template = _pod_template(service)
    if template:
        component["podTemplate"] = template
    alpha_only = {k: v for k, v in service.items() if k not in _SERVICE_MAPPED}
    # Service-level env, probes and mounts land in the main container, and the main container's own
    # resources join the service's: remember where each came from.
    alpha_only.update({k: service[k] for k in _FOLDED_INTO_MAIN if k in service})
    main = (service.get("extraPodSpec") or {}).get("mainContainer") or {}
    if "resources" in main and (main["resources"] or service.get("resources")):  # else it passes as it is
        alpha_only["mainContainerResources"] = main["resources"]
    if "name" in main:
        alpha_only["mainContainerName"] = main["name"]
    if sub and "type" in component and component["type"] != sub:
        alpha_only["subComponentType"] = sub
    if service.get("serviceName") not in (None, name):
        alpha_only["serviceName"] = service["serviceName"]
    if "sharedMemory" in service and "sharedMemorySize" not in component:
        alpha_only["sharedMemory"] = service["sharedMemory"]
    return component, alpha_only


def _pod_template(service: dict[str, Any]) -> dict[str, Any]:
    extra = copy.deepcopy(service.get("extraPodSpec") or {})
    main = extra.pop("mainContainer", None)
    others = extra.pop("containers", None) or []
    container = dict(main or {})
    container["name"] = _MAIN
    env = [*(service.get("envs") or []), *(container.get("env") or [])]
    if env:
        container["env"] = env
    resources = _resources_to_hub(service.get("resources") or {})
    if resources:
        container["resources"] = _merged(resources, container.get("resources") or {})
    for probe in ("livenessProbe", "readinessProbe"):
        if probe in service:
            container[probe] = service[probe]
    mounts = [{"name": m["name"], "mountPath": m.get("mountPoint", "")} for m in service.get("volumeMounts") or []]
    if mounts:
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), *mounts]
    spec = dict(extra)
    if main is not None or len(container) > 1:
        spec["containers"] = [container, *others]
    elif others:
        spec["containers"] = others
    template: dict[str, Any] = {}
    if service.get("extraPodMetadata"):
        template["metadata"] = service["extraPodMetadata"]
    if spec:
        template["spec"] = spec
    return template


def _resources_to_hub(resources: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in ("requests", "limits"):
        alpha = resources.get(side) or {}
        quantities = {k: alpha[k] for k in ("cpu", "memory") if k in alpha}
        if "gpu" in alpha:
            quantities[alpha.get("gpuType") or _GPU] = alpha["gpu"]
        quantities.update(alpha.get("custom") or {})
        if quantities:
            out[side] = quantities
    if resources.get("claims"):
        out["claims"] = resources["claims"]
    return out


# ---- v1beta1 -> v1alpha1 -----------------------------------------------------------------------

def _from_hub(obj: dict[str, Any]) -> dict[str, Any]:
    saved = _take_saved(obj)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        keep: dict[str, Any] = {}
        obj["spec"] = _spec_from_hub(spec, saved, keep)
        _put_saved(obj, keep)
    status = obj.get("status")
    if isinstance(status, dict) and "components" in status:
        status["services"] = {name: {**entry, "componentName": (entry.get("componentNames") or [name])[-1]}
                              for name, entry in (status.pop("components") or {}).items()}
    return obj


def _spec_from_hub(spec: dict[str, Any], saved: dict[str, Any], keep: dict[str, Any]) -> dict[str, Any]:
    out = {k: spec[k] for k in _SHARED_SPEC_FIELDS if k in spec}
    if "env" in spec:
        out["envs"] = spec["env"]
    if "pvcs" in saved:
        out["pvcs"] = saved["pvcs"]
    alpha_only = saved.get("services") or {}
    components = spec.get("components") or []
    names = [c.get("name", "") for c in components]
    if names != sorted(names):
        keep["order"] = names
    services, kept = {}, {}
    for component in components:
        name = component.get("name", "")
        service, hub_only = _component_from_hub(component)
        _unfold_main(service, alpha_only.get(name) or {})
        service.update({k: v for k, v in (alpha_only.get(name) or {}).items()
                        if k not in service and k not in _MAIN_ORIGINS})
        services[name] = service
        if hub_only:
            kept[name] = hub_only
    if components:
        out["services"] = services
    if kept:
        keep["components"] = kept
    for key in spec.keys() - {*_SHARED_SPEC_FIELDS, "env", "components"}:
        out[key] = spec[key]
    return out


def _component_from_hub(component: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    service: dict[str, Any] = {}
    kind = component.get("type")
    if kind in _SUB_TYPES:
        service["componentType"], service["subComponentType"] = "worker", kind
    elif kind:
        service["componentType"] = kind
    for key in _SHARED_SERVICE_FIELDS:
        if key in component:
            service[key] = component[key]
    if "sharedMemorySize" in component:
        service["sharedMemory"] = {"size": component["sharedMemorySize"]}
    template = copy.deepcopy(component.get("podTemplate") or {})
    if template.get("metadata"):
        service["extraPodMetadata"] = template["metadata"]
    extra = dict(template.get("spec") or {})
    containers = extra.pop("containers", None) or []
    main = next((c for c in containers if c.get("name") == _MAIN), None)
    others = [c for c in containers if c is not main]
    if main is not None:
        main = dict(main)
        del main["name"]
        if "resources" in main:
            resources = _resources_from_hub(main.pop("resources") or {})
            if resources:
                service["resources"] = resources
            else:
                main["resources"] = {}  # said so explicitly: keep it, a round trip must give it back
        extra["mainContainer"] = main  # `_unfold_main` drops it if nothing is left
    if others:
        extra["containers"] = others
    if extra:
        service["extraPodSpec"] = extra
    hub_only = {k: v for k, v in component.items() if k not in _COMPONENT_MAPPED}
    return service, hub_only


def _merged(service: dict[str, Any], main: dict[str, Any]) -> dict[str, Any]:
    out = {side: {**(service.get(side) or {}), **(main.get(side) or {})} for side in ("requests", "limits")
           if side in service or side in main}
    claims = [*(service.get("claims") or []), *(main.get("claims") or [])]
    if claims:
        out["claims"] = claims
    return out


def _without(resources: dict[str, Any], origin: dict[str, Any]) -> dict[str, Any]:
    out = {side: {k: v for k, v in (resources.get(side) or {}).items() if k not in (origin.get(side) or {})}
           for side in ("requests", "limits") if side in resources}
    claims = [c for c in resources.get("claims") or [] if c not in (origin.get("claims") or [])]
    if claims:
        out["claims"] = claims
    return {side: v for side, v in out.items() if v}


def _resources_from_hub(resources: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in ("requests", "limits"):
        quantities = dict(resources.get(side) or {})
        alpha = {k: quantities.pop(k) for k in ("cpu", "memory") if k in quantities}
        gpu_keys = [k for k in quantities if k == _GPU or k.endswith("/gpu")]
        if gpu_keys:
            key = gpu_keys[0]
            alpha["gpu"] = str(quantities.pop(key))
            if key != _GPU:
                alpha["gpuType"] = key
        if quantities:
            alpha["custom"] = quantities
        if alpha:
            out[side] = alpha
    if resources.get("claims"):
        out["claims"] = resources["claims"]
    return out


def _unfold_main(service: dict[str, Any], alpha_only: dict[str, Any]) -> None:
    """Take back out of the main container what a v1alpha1 service had at its own level."""
    main = (service.get("extraPodSpec") or {}).get("mainContainer")
    if main is None:
        return
    if "mainContainerResources" in alpha_only:
        origin = alpha_only["mainContainerResources"]
        total = _resources_to_hub(service.pop("resources", {})) if "resources" in service else {}
        total = _merged(total, main.pop("resources", None) or {})
        service_level = _resources_from_hub(_without(total, origin))
        if service_level:
            service["resources"] = service_level
        main["resources"] = origin
    if "mainContainerName" in alpha_only:
        main["name"] = alpha_only["mainContainerName"]
    envs = alpha_only.get("envs") or []
    if envs and main.get("env", [])[:len(envs)] == envs:
        main["env"] = main["env"][len(envs):]
    for probe in ("livenessProbe", "readinessProbe"):
        if probe in alpha_only and main.get(probe) == alpha_only[probe]:
            del main[probe]
    mounts = [{"name": m["name"], "mountPath": m.get("mountPoint", "")} for m in alpha_only.get("volumeMounts") or []]
    if mounts and main.get("volumeMounts", [])[-len(mounts):] == mounts:
        main["volumeMounts"] = main["volumeMounts"][:-len(mounts)]
    for key in ("env", "volumeMounts"):
        if key in main and not main[key]:
            del main[key]
    if not main:
        del service["extraPodSpec"]["mainContainer"]
        if not service["extraPodSpec"]:
            del service["extraPodSpec"]


# ---- the preservation annotation ---------------------------------------------------------------

def _take_saved(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    raw = annotations.pop(SAVED, None)
    if not annotations and "annotations" in (obj.get("metadata") or {}):
        del obj["metadata"]["annotations"]
    try:  # best effort, as upstream: a hand-written value that does not parse is dropped
        saved = json.loads(raw) if raw else {}
    except ValueError:
        saved = {}
    return saved if isinstance(saved, dict) else {}


def _put_saved(obj: dict[str, Any], keep: dict[str, Any]) -> None:
    if keep:
        obj.setdefault("metadata", {}).setdefault("annotations", {})[SAVED] = json.dumps(keep, sort_keys=True)

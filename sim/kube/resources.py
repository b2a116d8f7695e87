"""The resource types one simulated cluster serves: a handful of core `v1` kinds and every CRD
in the CRD directory (by default `sim/kube/crds`, inside the repository: the Dynamo CRDs built by
`sim.kube.build_crds` and the Envoy AI Gateway kinds), each version with its schema."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sim.kube.schema import ObjectSchema

CRD_DIR_ENV = "WINGSMITH_SIM_CRD_DIR"
# Shipped with the repository, so a fresh clone serves the same CRDs as the team's machines.
DEFAULT_CRD_DIR = Path(__file__).with_name("crds")
_CRD_GLOBS = ("*.json", "*.yaml")


@dataclass(frozen=True)
class ResourceType:
    group: str
    versions: tuple[str, ...]
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    schemas: dict[str, ObjectSchema] = field(default_factory=dict, compare=False, hash=False)
    storage_version: str = "v1"

    @property
    def qualified(self) -> str:
        """`pods`, `dynamographdeployments.nvidia.com`: how errors name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def kind_qualified(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def is_custom(self) -> bool:
        return bool(self.schemas)


CORE_TYPES = [
    ResourceType("", ("v1",), "namespaces", "namespace", "Namespace", False, ("ns",)),
    ResourceType("", ("v1",), "nodes", "node", "Node", False, ("no",), status_subresource=True),
    ResourceType("", ("v1",), "pods", "pod", "Pod", True, ("po",), status_subresource=True),
    ResourceType("", ("v1",), "secrets", "secret", "Secret", True),
    ResourceType("", ("v1",), "configmaps", "configmap", "ConfigMap", True, ("cm",)),
    ResourceType("", ("v1",), "services", "service", "Service", True, ("svc",)),
    ResourceType("", ("v1",), "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim",
                 True, ("pvc",)),
]
CRD_TYPE = ResourceType("apiextensions.k8s.io", ("v1",), "customresourcedefinitions",
                        "customresourcedefinition", "CustomResourceDefinition", False, ("crd",))


def crd_dir(explicit: Path | None = None) -> Path:
    candidates = [explicit] if explicit else [Path(os.environ[CRD_DIR_ENV])] if os.environ.get(CRD_DIR_ENV) else []
    candidates = candidates or [DEFAULT_CRD_DIR]
    for candidate in candidates:
        if candidate.is_dir() and any(path for pattern in _CRD_GLOBS for path in candidate.glob(pattern)):
            return candidate
    raise FileNotFoundError(
        f"no CRD files (*.json, *.yaml) in {candidates[0]}; pass crd_dir= or set {CRD_DIR_ENV} "
        "to a directory holding them (`python -m sim.kube.build_crds` writes the Dynamo ones)")


@functools.lru_cache(maxsize=4)
def load_crds(directory: Path) -> tuple[tuple[dict[str, Any], ResourceType], ...]:
    """Every CRD in the directory (JSON or YAML), parsed once per process."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = []
    paths = sorted(path for pattern in _CRD_GLOBS for path in directory.glob(pattern))
    for path in paths:
        with path.open() as fh:
            docs = [json.load(fh)] if path.suffix == ".json" else list(yaml.load_all(fh, Loader=loader))
        for doc in docs:
            if doc and doc.get("kind") == "CustomResourceDefinition":
                out.append((doc, _crd_type(doc)))
    return tuple(out)


def _crd_type(crd: dict[str, Any]) -> ResourceType:
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    storage = next((v["name"] for v in served if v.get("storage")), served[0]["name"])
    return ResourceType(
        group=spec["group"],
        versions=tuple(v["name"] for v in served),
        plural=names["plural"],
        singular=names.get("singular", names["kind"].lower()),
        kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames", ())),
        status_subresource="status" in (served[0].get("subresources") or {}),
        schemas={v["name"]: ObjectSchema(v["schema"]["openAPIV3Schema"]) for v in served},
        storage_version=storage,
    )

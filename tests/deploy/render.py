"""The plane's Kubernetes manifests as data: `kubectl kustomize` renders an overlay (or the base with
components), and `processes` reads back, per Deployment, the command each container runs and the
environment it gets, with ConfigMaps resolved from the rendering and Secrets from a dict the caller
gives. Tests that start the plane from what production renders (the replicated plane, the bench)
use this, so the manifests cannot drift from what is tested."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "deploy" / "kustomize"
BASE = KUSTOMIZE / "base"
OVERLAYS = sorted(p.parent for p in (KUSTOMIZE / "overlays").glob("*/kustomization.yaml"))
COMPONENTS = sorted(p.parent for p in (KUSTOMIZE / "components").glob("*/kustomization.yaml"))

# Secrets by (Secret name, key) → value; e.g. {("wingsmith-postgres", "database-url"): "postgresql://..."}.
Secrets = Mapping[tuple[str, str], str]


class KubectlMissing(RuntimeError):
    pass


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        raise KubectlMissing("kubectl (with Kustomize built in) is not on PATH: `apt-get install kubectl`, "
                             "or see docs/production.md")
    return found


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize <directory>` renders, in order."""
    done = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed:\n{done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_with(components: Iterable[Path], base: Path = BASE) -> list[dict[str, Any]]:
    """The base (or an overlay) with extra components, through a kustomization of the caller's own in
    a temporary directory (Kustomize refuses absolute paths, so it names them relatively)."""
    with tempfile.TemporaryDirectory(prefix="wingsmith-kustomize-") as tmp:
        rel = lambda p: os.path.relpath(p, tmp)  # noqa: E731
        Path(tmp, "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [rel(base)], "components": [rel(c) for c in components]}))
        return render(Path(tmp))


@dataclass
class Process:
    """One container of a Deployment, as the kubelet would start it."""

    deployment: str
    container: str
    image: str
    command: list[str]
    env: dict[str, str]
    replicas: int
    # mountPath → ("secret" | "configMap" | "emptyDir" | ..., the source's name or "")
    mounts: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the env vars set from a Secret (secretKeyRef)
    secret_env: set[str] = field(default_factory=set)
    ports: dict[str, int] = field(default_factory=dict)
    init: list[Process] = field(default_factory=list)


def by_kind(objects: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def processes(objects: list[dict[str, Any]], secrets: Secrets | None = None) -> dict[str, Process]:
    """Deployment name → its (first) container as a Process; init containers in `.init`. A Secret
    reference that `secrets` lacks raises KeyError naming it, unless the reference is optional."""
    config_maps = {o["metadata"]["name"]: o.get("data") or {} for o in by_kind(objects, "ConfigMap")}
    out = {}
    for deployment in by_kind(objects, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        main = _process(deployment, pod["containers"][0], config_maps, secrets or {})
        main.init = [_process(deployment, c, config_maps, secrets or {}) for c in pod.get("initContainers") or []]
        out[main.deployment] = main
    return out


def _process(deployment: dict[str, Any], c: dict[str, Any], config_maps: Mapping[str, Mapping[str, str]],
             secrets: Secrets) -> Process:
    volumes = {v["name"]: _volume_source(v) for v in deployment["spec"]["template"]["spec"].get("volumes") or []}
    return Process(deployment=deployment["metadata"]["name"], container=c["name"], image=c["image"],
                   command=[*(c.get("command") or []), *(c.get("args") or [])],
                   env=container_env(c, config_maps, secrets), replicas=deployment["spec"].get("replicas", 1),
                   mounts={m["mountPath"]: volumes[m["name"]] for m in c.get("volumeMounts") or []},
                   secret_env={v["name"] for v in c.get("env") or [] if "secretKeyRef" in (v.get("valueFrom") or {})},
                   ports={p.get("name", str(p["containerPort"])): p["containerPort"] for p in c.get("ports") or []})


def container_env(container: dict[str, Any], config_maps: Mapping[str, Mapping[str, str]],
                  secrets: Secrets) -> dict[str, str]:
    """The container's environment in Kubernetes' order: envFrom first, then env (which wins)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            env.update(config_maps[source["configMapRef"]["name"]])
        else:
            raise NotImplementedError(f"envFrom {source}")
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = var["value"]
            continue
        ref = var["valueFrom"]
        if "secretKeyRef" in ref:
            key = (ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"])
            if key in secrets:
                env[var["name"]] = secrets[key]
            elif not ref["secretKeyRef"].get("optional"):
                raise KeyError(f"{var['name']} needs Secret {key[0]} key {key[1]}")
        elif "configMapKeyRef" in ref:
            env[var["name"]] = config_maps[ref["configMapKeyRef"]["name"]][ref["configMapKeyRef"]["key"]]
        else:
            raise NotImplementedError(f"valueFrom {ref}")
    return env


def secret_refs(objects: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """Every (Secret, key) the rendered objects read through env; mounted Secrets have key ''."""
    found: set[tuple[str, str]] = set()
    for deployment in by_kind(objects, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        for c in [*pod["containers"], *(pod.get("initContainers") or [])]:
            for var in c.get("env") or []:
                ref = (var.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    found.add((ref["name"], ref["key"]))
        for v in pod.get("volumes") or []:
            if "secret" in v:
                found.add((v["secret"]["secretName"], ""))
    return found


def _volume_source(volume: dict[str, Any]) -> tuple[str, str]:
    kind = next(k for k in volume if k != "name")
    spec = volume[kind] or {}
    return kind, spec.get("secretName") or spec.get("name") or ""

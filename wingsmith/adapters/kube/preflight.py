"""A member cluster's preflight: ask the cluster, through the plane's own kubeconfig, whether it has what
the plane needs (wingsmith/domain/member_clusters.py says what), and answer a checklist.

Blocking (the kubernetes client is synchronous): run from the kube worker's sync activity only. Bounded
in time: every call has short (connect, read) timeouts and is not retried here (the person who asked is
waiting; they check again), and once `deadline_seconds` have passed the checks not yet made are
listed as not checked (a warning, not a failure). Reads only; the Hub token Secret is read as metadata
(`PartialObjectMetadata`), so its value never reaches the plane.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from kubernetes import client as k8s

from wingsmith.adapters.inventory import read_inventory
from wingsmith.adapters.kube.client import raw_json
from wingsmith.adapters.kube.errors import KubeError, classify
from wingsmith.domain.hardware import get_hardware, hardware_for_product_label
from wingsmith.domain.member_clusters import (
    DYNAMO_RELEASE,
    GPU_PRODUCT_LABEL,
    GUIDE,
    OPERATOR_SELECTOR,
    REQUIRED_CRDS,
    CheckLine,
    Preflight,
    permissions,
)

REQUEST_TIMEOUT = (3.0, 5.0)
DEADLINE_SECONDS = 25.0
_METADATA_ONLY = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}


class _Out(Exception):
    """The check's time is up."""


def run_preflight(api: k8s.ApiClient, *, namespace: str, hf_token_secret: str | None,
                  deadline_seconds: float = DEADLINE_SECONDS, clock: Callable[[], float] = time.monotonic,
                  request_timeout: tuple[float, float] = REQUEST_TIMEOUT) -> Preflight:
    """The checklist of one cluster. A cluster whose API does not answer gets that one line."""
    start = clock()
    lines: list[CheckLine] = []

    def call(doing: str, fn: Callable[[], Any]) -> Any:
        if clock() - start > deadline_seconds:
            raise _Out
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - classify re-raises what it does not know
            raise classify(exc, doing=doing) from None

    version = _api_server(api, call, request_timeout, lines)
    if version is not None:
        checks = (_dynamo_crds, _operator, _permissions, _namespace, _hub_token_secret, _gpu_nodes)
        for check in checks:
            try:
                check(api, call, request_timeout, lines, namespace, hf_token_secret)
            except _Out:
                lines.append(CheckLine(check=check.__name__.strip("_"), status="warn",
                                       detail=f"not checked: the preflight's {deadline_seconds:g} s were up",
                                       fix="check again when the cluster's API answers faster"))
    return Preflight(checked_at=datetime.now(UTC), lines=lines)


Call = Callable[[str, Callable[[], Any]], Any]


def _api_server(api: k8s.ApiClient, call: Call, timeout: tuple[float, float], lines: list[CheckLine]) -> str | None:
    try:
        info = call("reading the API server's version",
                    lambda: raw_json(k8s.VersionApi(api).get_code(_preload_content=False, _request_timeout=timeout)))
    except (KubeError, _Out) as exc:
        detail = exc.message if isinstance(exc, KubeError) else "no answer in time"
        lines.append(CheckLine(check="api_server", status="fail", detail=f"the API server did not answer: {detail}",
                               fix="check the kubeconfig's server address, CA and credentials (`kubectl "
                                   "--kubeconfig <file> --context <context> version` must answer)"))
        return None
    version = str(info.get("gitVersion") or "unknown")
    lines.append(CheckLine(check="api_server", status="pass", detail=f"answers with the kubeconfig given: {version}"))
    return version


def _dynamo_crds(api: k8s.ApiClient, call: Call, timeout: tuple[float, float], lines: list[CheckLine],
                 namespace: str, hf_token_secret: str | None) -> None:
    install = (f"install the Dynamo platform's CRDs and operator, release {DYNAMO_RELEASE} or a later 1.x "
               f"(helm charts dynamo-crds and dynamo-platform; {GUIDE}#the-dynamo-operator-and-its-crds)")
    extensions = k8s.ApiextensionsV1Api(api)
    for crd in REQUIRED_CRDS:
        try:
            found = call(f"reading CRD {crd.name}", partial(
                _raw, extensions.read_custom_resource_definition, crd.name, _request_timeout=timeout))
        except KubeError as exc:
            if exc.status == 404:
                lines.append(CheckLine(check="dynamo_crds", status="fail",
                                       detail=f"{crd.kind} ({crd.name}) is not installed", fix=install))
            else:
                lines.append(_unreadable("dynamo_crds", f"CRD {crd.name}", exc))
            continue
        served = [v.get("name") for v in (found.get("spec") or {}).get("versions") or [] if v.get("served", True)]
        if crd.version in served:
            lines.append(CheckLine(check="dynamo_crds", status="pass",
                                   detail=f"{crd.kind} serves {crd.version} (served: {', '.join(map(str, served))})"))
        else:
            lines.append(CheckLine(
                check="dynamo_crds", status="fail",
                detail=f"{crd.kind} serves {', '.join(map(str, served)) or 'no version'}; the plane renders "
                       f"{crd.version}", fix=f"upgrade: {install}"))


def _operator(api: k8s.ApiClient, call: Call, timeout: tuple[float, float], lines: list[CheckLine],
              namespace: str, hf_token_secret: str | None) -> None:
    try:
        pods = call("listing the Dynamo operator's pods", lambda: raw_json(
            k8s.CoreV1Api(api).list_pod_for_all_namespaces(label_selector=OPERATOR_SELECTOR, _preload_content=False,
                                                           _request_timeout=timeout)).get("items") or [])
    except KubeError as exc:
        lines.append(_unreadable("dynamo_operator", "the operator's pods", exc))
        return
    if not pods:
        lines.append(CheckLine(check="dynamo_operator", status="warn",
                               detail=f"no pod labelled {OPERATOR_SELECTOR} in any namespace",
                               fix=f"install the Dynamo platform (operator) release {DYNAMO_RELEASE}, or label its "
                                   f"controller's pods {OPERATOR_SELECTOR} so the plane can see it runs"))
        return
    ready = [p for p in pods if _ready(p)]
    images = sorted({c.get("image", "?") for p in pods for c in (p.get("spec") or {}).get("containers") or []})
    where = ", ".join(sorted({f"{p['metadata'].get('namespace')}/{p['metadata'].get('name')}" for p in pods})[:3])
    if ready:
        lines.append(CheckLine(check="dynamo_operator", status="pass",
                               detail=f"{len(ready)} of {len(pods)} pod(s) ready ({where}; {', '.join(images[:3])})"))
    else:
        lines.append(CheckLine(check="dynamo_operator", status="fail",
                               detail=f"none of its {len(pods)} pod(s) is ready ({where})",
                               fix="see why: kubectl -n <namespace> describe pod <pod> (then its logs)"))


def _raw(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A generated client call's JSON answer (the generated models are not needed here)."""
    return raw_json(method(*args, _preload_content=False, **kwargs))


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _permissions(api: k8s.ApiClient, call: Call, timeout: tuple[float, float], lines: list[CheckLine],
                 namespace: str, hf_token_secret: str | None) -> None:
    authz = k8s.AuthorizationV1Api(api)
    asked = 0
    missing: list[CheckLine] = []
    for permission in permissions(hf_token_secret):
        denied = []
        for verb in permission.verbs:
            for name in permission.names or (None,):
                attributes: dict[str, Any] = {"verb": verb, "group": permission.group, "resource": permission.resource}
                if permission.scope == "namespace":
                    attributes["namespace"] = namespace
                if name:
                    attributes["name"] = name
                body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                        "spec": {"resourceAttributes": attributes}}
                try:
                    answer = call(f"asking whether the plane may {verb} {permission.qualified}", partial(
                        _raw, authz.create_self_subject_access_review, body, _request_timeout=timeout))
                except KubeError as exc:
                    lines.append(_unreadable("permissions", "access reviews (SelfSubjectAccessReview)", exc))
                    return
                asked += 1
                if not (answer.get("status") or {}).get("allowed"):
                    denied.append(verb)
        if denied:
            where = f"in namespace {namespace}" if permission.scope == "namespace" else "across the cluster"
            named = f" ({', '.join(permission.names)})" if permission.names else ""
            missing.append(CheckLine(
                check=f"permission:{permission.qualified}", status="fail",
                detail=f"the plane's user may not {', '.join(denied)} {permission.qualified}{named} {where}: "
                       f"{permission.why}",
                fix=f"grant it: apply the Role and ClusterRole of {GUIDE}#the-role-for-the-planes-user "
                    f"(`wingsmith clusters role --namespace {namespace}` prints them) bound to the kubeconfig's user"))
    if missing:
        lines.extend(missing)
    else:
        lines.append(CheckLine(check="permissions", status="pass",
                               detail=f"the plane's user may do all {asked} verb(s) it uses (SelfSubjectAccessReview)"))


def _namespace(api: k8s.ApiClient, call: Call, timeout: tuple[float, float], lines: list[CheckLine],
               namespace: str, hf_token_secret: str | None) -> None:
    try:
        call(f"reading namespace {namespace}", lambda: k8s.CoreV1Api(api).read_namespace(
            namespace, _preload_content=False, _request_timeout=timeout))
    except KubeError as exc:
        if exc.status == 404:
            lines.append(CheckLine(check="namespace", status="fail", detail=f"namespace {namespace} does not exist",
                                   fix=f"kubectl create namespace {namespace}"))
        else:
            lines.append(_unreadable("namespace", f"namespace {namespace}", exc))
        return
    lines.append(CheckLine(check="namespace", status="pass", detail=f"namespace {namespace} exists"))


def _hub_token_secret(api: k8s.ApiClient, call: Call, timeout: tuple[float, float], lines: list[CheckLine],
                      namespace: str, hf_token_secret: str | None) -> None:
    if not hf_token_secret:
        lines.append(CheckLine(check="hub_token_secret", status="pass",
                               detail="no Hub token Secret is named (WINGSMITH_HF_TOKEN_SECRET unset): "
                                      "only public models can be served"))
        return
    try:
        # As metadata: the Secret's value never leaves the cluster.
        call(f"looking for Secret {namespace}/{hf_token_secret}", lambda: k8s.CoreV1Api(api).read_namespaced_secret(
            hf_token_secret, namespace, _headers=_METADATA_ONLY, _preload_content=False, _request_timeout=timeout))
    except KubeError as exc:
        if exc.status == 404:
            lines.append(CheckLine(
                check="hub_token_secret", status="fail",
                detail=f"Secret {hf_token_secret} (the Hugging Face token the deployments read) is not in "
                       f"namespace {namespace}",
                fix=f"kubectl -n {namespace} create secret generic {hf_token_secret} --from-literal=HF_TOKEN=<token>"))
        else:
            lines.append(_unreadable("hub_token_secret", f"Secret {namespace}/{hf_token_secret}", exc))
        return
    lines.append(CheckLine(check="hub_token_secret", status="pass",
                           detail=f"Secret {hf_token_secret} exists in namespace {namespace} (its value is not read)"))


def _gpu_nodes(api: k8s.ApiClient, call: Call, timeout: tuple[float, float], lines: list[CheckLine],
               namespace: str, hf_token_secret: str | None) -> None:
    try:
        inventory = call("reading the GPU nodes", lambda: read_inventory(api, "preflight"))
    except KubeError as exc:
        lines.append(_unreadable("gpu_nodes", "the nodes", exc))
        return
    cards: dict[str, list[int]] = {}  # product -> [nodes, allocatable GPUs, free GPUs]
    for pool in inventory.pools:
        counts = cards.setdefault(pool.product, [0, 0, 0])
        counts[0] += pool.nodes
        counts[1] += pool.nodes * pool.gpus_per_node
        counts[2] += pool.nodes * pool.free_gpus
    found = []
    placeable = 0
    for product, (nodes, gpus, free) in sorted(cards.items()):
        card = hardware_for_product_label(product)
        name = f"{product} ({card.id})" if card else f"{product} (not a card the plane knows)"
        if card is not None and get_hardware(card.id).placeable:
            placeable += nodes
        found.append(f"{nodes} node(s) of {name}: {gpus} GPUs allocatable, {free} free")
    notes = []
    if inventory.unlabelled_gpu_nodes:
        notes.append(f"{inventory.unlabelled_gpu_nodes} GPU node(s) carry no {GPU_PRODUCT_LABEL} label")
    if inventory.unschedulable_gpu_nodes:
        notes.append(f"{inventory.unschedulable_gpu_nodes} GPU node(s) cordoned or not Ready")
    detail = "; ".join(found + notes) or "no GPU nodes (no node has allocatable nvidia.com/gpu)"
    if placeable:
        lines.append(CheckLine(check="gpu_nodes", status="pass" if not notes else "warn", detail=detail,
                               fix="" if not notes else f"run NVIDIA GPU feature discovery (it writes "
                                                         f"{GPU_PRODUCT_LABEL}), or register the nodes by hand "
                                                         "(manual_inventory)"))
    else:
        lines.append(CheckLine(check="gpu_nodes", status="warn", detail=detail,
                               fix=f"GPU nodes need allocatable nvidia.com/gpu (the NVIDIA device plugin) and the "
                                   f"{GPU_PRODUCT_LABEL} label (GPU feature discovery); or register the cluster "
                                   "with a manual_inventory"))


def _unreadable(check: str, what: str, exc: KubeError) -> CheckLine:
    if exc.status == 403:
        return CheckLine(check=check, status="fail", detail=f"not allowed to read {what}: {exc.message}",
                         fix=f"grant the plane's user the Role and ClusterRole of {GUIDE}#the-role-for-the-planes-user")
    return CheckLine(check=check, status="fail", detail=f"could not read {what}: {exc.message}",
                     fix="check again; if it persists, see the cluster's API server")

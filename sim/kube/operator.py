"""The simulated Dynamo operator of one cluster.

Each tick it reconciles every DynamoGraphDeployment the way the real operator shows it from the
outside: a finalizer; pods per component (replicas x multinode nodeCount), bound to nodes that
match the component's node selector and still have free `nvidia.com/gpu`; pod container states
that follow the cluster's faults; and the DGD status (`state`, the `Ready` condition,
`observedGeneration`, per-component replica counts). A change of a component's pod template replaces
that component's pods; a change of its replica count only adds or removes pods, as Dynamo's operator
scales without a rolling update. The deployment's frontend is published once its frontend pods run
and serves the model while every worker component has a ready replica, so a scale does not
interrupt it. Deleting the DGD removes pods and frontend, then the finalizer.

An operator started on a cluster that already holds deployments (the emulator restarted on the
same home) adopts them: pods already bound to nodes keep running as they were, so their
deployments stay ready and their frontends are published again on the first pass.

A pass reads the store once (nodes, pods, deployments) and shares the free GPUs between the
deployments it reconciles, so its cost grows with the cluster, not with its square. An idle cluster
costs nothing: a pass is skipped while nothing it depends on changed since the last one (the store's
resourceVersion counter, the faults, the delay, the published frontends) and no time-driven change
(a container starting, getting ready, restarting; "initializing" turning "pending") is due.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from sim.kube import errors
from sim.kube.faults import Faults
from sim.kube.frontend import Frontend, Frontends
from sim.kube.graph import Component, components, max_num_seqs, served_model_names
from sim.kube.load_model import MAX_NUM_SEQS, PROFILE_ANNOTATION
from sim.kube.store import MERGE, ClusterStore, WriteOptions, now

FINALIZER = "nvidia.com/finalizer"
FRONTEND_URL_ANNOTATION = "sim.wingsmith.dev/frontend-url"
LABEL_DGD = "nvidia.com/dynamo-graph-deployment-name"
LABEL_COMPONENT = "nvidia.com/dynamo-component"
LABEL_COMPONENT_TYPE = "nvidia.com/dynamo-component-type"
LABEL_GENERATION = "sim.wingsmith.dev/generation"  # the generation a pod was made for
LABEL_SPEC_HASH = "sim.wingsmith.dev/spec-hash"  # its component's pod template, replicas left out
MANAGER = "dynamo-operator"


# Wake a little before a time-driven change is due: float rounding must not make a pass come late.
_EARLY = 1e-3


@dataclass
class _Seen:
    generation: int
    since: float
    first: bool
    # The spec of this generation, parsed once: the store bumps the generation whenever the spec changes.
    parts: list[Component] | None = None
    models: list[str] | None = None
    slots: int | None = None  # the engine's `--max-num-seqs`, if its command line sets one


@dataclass
class _Pass:
    """What one pass reads once and shares between the deployments it reconciles."""

    clock: float
    free: dict[str, dict[str, Any]]  # node name -> {"labels", "free" GPUs}, kept current as pods bind and go
    pods: dict[tuple[str, str], list[dict[str, Any]]]  # (namespace, DGD name) -> its pods, as read
    wake: float = math.inf  # when the next time-driven change may be due
    settled: bool = True  # False when running the pass again could change something with no new input
    frontends: dict[tuple[str, str], Frontend | None] = field(default_factory=dict)  # as this pass left them

    def due(self, at: float) -> None:
        self.wake = min(self.wake, at - _EARLY)


@dataclass
class _Idle:
    """A settled pass: the next ones can be skipped while all of this still holds."""

    inputs: tuple[Any, ...]
    wake: float
    frontends: dict[tuple[str, str], Frontend | None]


class SimulatedOperator:
    def __init__(self, cluster: str, store: ClusterStore, faults: Faults, frontends: Frontends,
                 frontend_base_url: str, delay: float = 1.0):
        self.cluster = cluster
        self.store = store
        self.faults = faults
        self.frontends = frontends
        self.frontend_base_url = frontend_base_url.rstrip("/")
        self.delay = delay
        self._seen: dict[str, _Seen] = {}
        self._scheduled_at: dict[tuple[str, str], float] = {}
        self._dgd = store.type_of("nvidia.com", "dynamographdeployments")
        self._pods = store.type_of("", "pods")
        self._nodes = store.type_of("", "nodes")
        self._idle: _Idle | None = None
        self._fault_names = tuple(n for n in type(faults).model_fields if n != "frontends")  # per-DGD, not ours

    def frontend_url(self, namespace: str, name: str) -> str:
        return f"{self.frontend_base_url}/{namespace}/{name}"

    def adopt(self) -> None:
        """Take over what a previous run left: bound pods count as started long ago (their
        containers kept running while nobody watched), deployments as already seen."""
        long_ago = time.monotonic() - 10 * max(self.delay, 1.0)
        for pod in self.store.list(self._pods, "v1")["items"]:
            if pod["spec"].get("nodeName"):
                self._scheduled_at[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = long_ago
        for dgd in self.store.list(self._dgd, self._dgd.storage_version)["items"]:
            meta = dgd["metadata"]
            self._seen[meta["uid"]] = _Seen(meta.get("generation", 1), long_ago, first=False)

    async def run(self, tick: float = 0.05) -> None:
        while True:
            try:
                self.reconcile_all()
            except Exception:  # a bug in one pass must not stop the cluster; the next tick retries
                import logging
                logging.getLogger(__name__).exception("simulated operator pass failed", extra={"cluster": self.cluster})
            await asyncio.sleep(tick)

    def reconcile_all(self) -> None:
        clock = time.monotonic()
        settings = self._settings()
        if self._is_idle(clock, settings):
            return
        self._idle = None  # until this pass completes and settles
        with self.store.held():  # one consistent read, and no other thread's write goes unseen below
            work = self._read(clock)
            live = set()
            for dgd in self.store.stored(self._dgd):
                live.add(dgd["metadata"]["uid"])
                try:
                    self._reconcile(dgd, work)
                except errors.KubeError as exc:
                    if exc.code not in (404, 409):  # deleted or changed under us: next tick sees the new state
                        raise
                    work.settled = False
            for uid in set(self._seen) - live:
                del self._seen[uid]
            if work.settled:
                # Taken after the pass: its own writes are no reason to run again.
                self._idle = _Idle((self.store.resource_version, *settings), work.wake, work.frontends)

    # ---- skipping passes -----------------------------------------------------------------------

    def _settings(self) -> tuple[Any, ...]:
        """Everything besides the store and the clock a pass depends on (cheap to take and compare)."""
        return (self.delay, *(getattr(self.faults, n) for n in self._fault_names))

    def _is_idle(self, clock: float, settings: tuple[Any, ...]) -> bool:
        """Whether a pass now would change nothing: the last one settled and nothing it read changed
        since, no time-driven change is due, and nobody else moved the frontends it left."""
        idle = self._idle
        return (idle is not None and clock < idle.wake
                and idle.inputs == (self.store.resource_version, *settings)
                and all(self.frontends.get(self.cluster, namespace, name) == frontend
                        for (namespace, name), frontend in idle.frontends.items()))

    def _read(self, clock: float) -> _Pass:
        """Nodes and pods, once per pass: free GPUs per node and every deployment's pods. A pass reads
        the stored objects themselves (no copies) and must change nothing it read."""
        free: dict[str, dict[str, Any]] = {}
        for n in self.store.stored(self._nodes):
            free[n["metadata"]["name"]] = {"labels": n["metadata"].get("labels") or {},
                                           "free": int(n["status"]["allocatable"].get("nvidia.com/gpu", "0"))}
        pods: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for pod in self.store.stored(self._pods):
            node = pod["spec"].get("nodeName")
            if node in free:
                free[node]["free"] -= _pod_gpus(pod)
            owner = (pod["metadata"].get("labels") or {}).get(LABEL_DGD)
            if owner is not None:
                pods.setdefault((pod["metadata"]["namespace"], owner), []).append(pod)
        return _Pass(clock, free, pods)

    # ---- one deployment ------------------------------------------------------------------------

    def _reconcile(self, dgd: dict[str, Any], work: _Pass) -> None:
        meta = dgd["metadata"]
        namespace, name, version = meta["namespace"], meta["name"], self._dgd.storage_version
        clock = work.clock
        if meta.get("deletionTimestamp"):
            self._tear_down(namespace, name, meta, work)
            return
        url = self.frontend_url(namespace, name)
        annotated_url = (meta.get("annotations") or {}).get(FRONTEND_URL_ANNOTATION)
        if FINALIZER not in (meta.get("finalizers") or []) or annotated_url != url:
            dgd = self.store.patch(self._dgd, version, namespace, name, {"metadata": {
                "finalizers": [*(f for f in meta.get("finalizers") or [] if f != FINALIZER), FINALIZER],
                "annotations": {FRONTEND_URL_ANNOTATION: url}}}, MERGE, WriteOptions(manager=MANAGER))
            meta = dgd["metadata"]

        generation = meta.get("generation", 1)
        seen = self._seen.get(meta["uid"])
        if seen is None or seen.generation != generation:
            seen = self._seen[meta["uid"]] = _Seen(generation, clock, first=seen is None)
        if seen.parts is None:
            seen.parts = components(dgd)
            seen.slots = max_num_seqs(dgd, MAX_NUM_SEQS)
        parts = seen.parts
        pods = self._sync_pods(namespace, name, generation, parts, work)

        ready_by_component: dict[str, tuple[int, int]] = {}
        for part in parts:
            mine = [p for p in pods if p["metadata"]["labels"][LABEL_COMPONENT] == part.name]
            ready_by_component[part.name] = (sum(_pod_ready(p) for p in mine), len(mine))
        workers_ready = all(r == n for c, (r, n) in ready_by_component.items())
        ready_pods = {p["metadata"]["name"] for p in pods if _pod_ready(p)}
        # The frontend routes to any registered worker: one whole ready replica per component serves.
        serving = all(any(set(replica) <= ready_pods for replica in _replica_pods(name, part))
                      for part in parts if not part.is_frontend)
        # The load the frontend can spread: the fewest whole ready replicas of any engine component.
        replicas = min((sum(set(replica) <= ready_pods for replica in _replica_pods(name, part))
                        for part in parts if part.is_engine), default=1)
        self._publish_frontend(namespace, name, dgd, seen, pods, serving, replicas)
        work.frontends[(namespace, name)] = self.frontends.get(self.cluster, namespace, name)
        self._write_status(dgd, version, seen, work, parts, pods, ready_by_component, workers_ready)

    def _tear_down(self, namespace: str, name: str, meta: dict[str, Any], work: _Pass) -> None:
        for pod in work.pods.get((namespace, name), []):
            self._delete_pod(namespace, pod, work)
        self.frontends.remove(self.cluster, namespace, name)
        work.frontends[(namespace, name)] = None
        remaining = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        if FINALIZER in (meta.get("finalizers") or []):
            self.store.patch(self._dgd, self._dgd.storage_version, namespace, name,
                             {"metadata": {"finalizers": remaining or None}}, MERGE, WriteOptions(manager=MANAGER))

    # ---- pods ----------------------------------------------------------------------------------

    def _delete_pod(self, namespace: str, pod: dict[str, Any], work: _Pass) -> None:
        pod_name = pod["metadata"]["name"]
        self._scheduled_at.pop((namespace, pod_name), None)
        try:
            self.store.delete(self._pods, "v1", namespace, pod_name)
        except errors.KubeError as exc:
            if exc.code != 404:
                raise
        node = work.free.get(pod["spec"].get("nodeName"))
        if node is not None:  # its GPUs are free again, for this pass's later deployments too
            node["free"] += _pod_gpus(pod)
        # A deployment reconciled earlier in this pass may fit in what was freed: the next pass must run.
        work.settled = False

    def _sync_pods(self, namespace: str, name: str, generation: int, parts: list[Component],
                   work: _Pass) -> list[dict[str, Any]]:
        desired = {pod_name: part for part in parts for replica in _replica_pods(name, part) for pod_name in replica}
        existing = {p["metadata"]["name"]: p for p in work.pods.get((namespace, name), [])}
        for pod_name, pod in list(existing.items()):
            if pod_name not in desired or _outdated(pod, desired[pod_name], generation):
                self._delete_pod(namespace, pod, work)
                del existing[pod_name]

        free, clock = work.free, work.clock
        result = []
        for pod_name, part in desired.items():
            pod = existing.get(pod_name) or self.store.create(
                self._pods, "v1", namespace, _pod_manifest(pod_name, name, generation, part),
                WriteOptions(manager=MANAGER))
            if not pod["spec"].get("nodeName"):
                node = _pick_node(free, part)
                if node:
                    free[node]["free"] -= part.gpus_per_pod
                    pod = self.store.patch(self._pods, "v1", namespace, pod_name, {"spec": {"nodeName": node}},
                                           MERGE, WriteOptions(manager="default-scheduler"))
                    self._scheduled_at[(namespace, pod_name)] = clock
            status = self._pod_status(namespace, pod, part, work)
            if _without_times(status) != _without_times(pod.get("status") or {}):
                body = {"metadata": {"name": pod_name}, "status": _keep_times(pod.get("status"), status)}
                pod = self.store.replace(self._pods, "v1", namespace, pod_name, body,
                                         WriteOptions(manager="kubelet"), subresource="status")
            result.append(pod)
        return result

    def _pod_status(self, namespace: str, pod: dict[str, Any], part: Component, work: _Pass) -> dict[str, Any]:
        free, clock = work.free, work.clock
        image = part.image or "nvcr.io/nvidia/ai-dynamo/runtime:sim"
        scheduled_at = self._scheduled_at.get((namespace, pod["metadata"]["name"]))
        if not pod["spec"].get("nodeName") or scheduled_at is None:
            matching = [n for n in free.values() if _selects(part.node_selector, n["labels"])]
            why = (f"0/{len(free)} nodes are available: {len(free) - len(matching)} node(s) didn't match Pod's node "
                   f"affinity/selector, {len(matching)} Insufficient nvidia.com/gpu.")
            return {"phase": "Pending", "conditions": [_condition("PodScheduled", "False", "Unschedulable", why)]}
        age = clock - scheduled_at
        faulty = part.is_engine
        f = self.faults
        started = age >= self.delay * 0.5
        if not started:  # the container starts (and, off the workers, gets ready) at delay / 2
            work.due(scheduled_at + self.delay * 0.5)
        elif age < self.delay:  # a worker gets ready at delay
            work.due(scheduled_at + self.delay)
        container: dict[str, Any] = {"name": "main", "image": image, "imageID": "", "ready": False,
                                     "restartCount": 0, "started": False}
        phase = "Running"
        if faulty and f.image_pull:
            phase = "Pending"
            container["state"] = {"waiting": {"reason": "ImagePullBackOff",
                                              "message": f'Back-off pulling image "{image}"'}}
        elif not started:
            phase = "Pending"
            container["state"] = {"waiting": {"reason": "ContainerCreating"}}
        elif faulty and (f.crash_loop or f.oom_killed):
            restarts = 1 + int((age - self.delay * 0.5) / f.restart_interval)
            work.due(scheduled_at + self.delay * 0.5 + restarts * f.restart_interval)  # the next restart
            reason, code = ("OOMKilled", 137) if f.oom_killed else ("Error", 1)
            container.update(restartCount=restarts, state={"waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {min(10 * 2 ** (restarts - 1), 300)}s restarting failed container=main "
                           f"pod={pod['metadata']['name']}"}},
                lastState={"terminated": {"reason": reason, "exitCode": code, "finishedAt": now()}})
        else:
            ready = not (faulty and f.never_ready) and age >= (self.delay * 0.5 if not faulty else self.delay)
            container.update(imageID=f"{image}@sha256:{'0' * 64}", started=True, ready=ready,
                             state={"running": {"startedAt": now()}})
        ready = container["ready"]
        return {
            "phase": phase, "hostIP": "10.0.0.1", "podIP": "10.1.0.1" if phase == "Running" else None,
            "conditions": [_condition("PodScheduled", "True"), _condition("Ready", "True" if ready else "False",
                                                                          None if ready else "ContainersNotReady")],
            "containerStatuses": [container],
        }

    # ---- frontend and status -------------------------------------------------------------------

    def _publish_frontend(self, namespace: str, name: str, dgd: dict[str, Any], seen: _Seen,
                          pods: list[dict[str, Any]], workers_serve: bool, replicas: int) -> None:
        front = [p for p in pods if p["metadata"]["labels"][LABEL_COMPONENT_TYPE] == "frontend"]
        if not front or not any(_pod_running(p) for p in front):
            self.frontends.remove(self.cluster, namespace, name)
            return
        serving = workers_serve and not self.faults.operator_failed
        if serving and seen.models is None:
            seen.models = served_model_names(dgd)
        profile = (dgd["metadata"].get("annotations") or {}).get(PROFILE_ANNOTATION)
        self.frontends.publish(self.cluster, namespace, name, list(seen.models or []) if serving else [],
                               replicas=replicas if serving else 0, max_num_seqs=seen.slots,
                               load_profile=profile if isinstance(profile, str) else None)

    def _write_status(self, dgd: dict[str, Any], version: str, seen: _Seen, work: _Pass, parts: list[Component],
                      pods: list[dict[str, Any]], ready_by_component: dict[str, tuple[int, int]],
                      all_ready: bool) -> None:
        meta, old = dgd["metadata"], dgd.get("status") or {}
        generation = meta.get("generation", 1)
        clock = work.clock
        if seen.first and clock - seen.since < self.delay * 0.25:  # "initializing" turns "pending" then
            work.due(seen.since + self.delay * 0.25)
        if self.faults.operator_failed:
            state, cond = "failed", ("False", "ReconcileFailed", "simulated reconcile error: the operator could not "
                                                                 "create the component resources")
        elif all_ready:
            state, cond = "successful", ("True", "AllComponentsReady", "All components are ready")
        else:
            waiting = ", ".join(f"{c}: {r}/{n} ready" for c, (r, n) in ready_by_component.items() if r < n)
            early = seen.first and clock - seen.since < self.delay * 0.25
            state, cond = ("initializing" if early else "pending"), ("False", "ComponentsNotReady",
                                                                     f"waiting for components: {waiting}")
        previous: dict[str, Any] = next((c for c in old.get("conditions") or [] if c.get("type") == "Ready"), {})
        transition = previous.get("lastTransitionTime") if previous.get("status") == cond[0] else now()
        per_component = {}
        for part in parts:
            ready, total = ready_by_component[part.name]
            names = sorted({p["metadata"]["name"] for p in pods
                            if p["metadata"]["labels"][LABEL_COMPONENT] == part.name})
            entry = {"componentKind": "PodCliqueScalingGroup" if part.node_count > 1 else "PodClique",
                     "componentNames": names, "replicas": part.replicas, "updatedReplicas": part.replicas,
                     "readyReplicas": ready // max(part.node_count, 1),
                     "availableReplicas": ready // max(part.node_count, 1)}
            if version == "v1alpha1":
                entry["componentName"] = part.name
            per_component[part.name] = entry
        status = {
            "state": state, "observedGeneration": generation,
            "conditions": [{"type": "Ready", "status": cond[0], "reason": cond[1], "message": cond[2],
                            "lastTransitionTime": transition or now(), "observedGeneration": generation}],
            ("components" if version == "v1beta1" else "services"): per_component,
        }
        if status != old:
            self.store.replace(self._dgd, version, meta["namespace"], meta["name"],
                               {"metadata": {"name": meta["name"], "resourceVersion": meta["resourceVersion"]},
                                "status": status}, WriteOptions(manager=MANAGER), subresource="status")


# ---- helpers -----------------------------------------------------------------------------------

def _dns(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def _replica_pods(dgd_name: str, part: Component) -> list[list[str]]:
    """The pod names of each replica of a component (one per node of a multinode replica)."""
    base = f"{_dns(dgd_name)}-{_dns(part.name)}"
    if part.node_count > 1:
        return [[f"{base}-{r}-{'ldr' if rank == 0 else 'wkr'}-{rank}" for rank in range(part.node_count)]
                for r in range(part.replicas)]
    return [[f"{base}-{r}"] for r in range(part.replicas)]


def _outdated(pod: dict[str, Any], part: Component, generation: int) -> bool:
    labels = pod["metadata"].get("labels") or {}
    if LABEL_SPEC_HASH in labels:
        return labels[LABEL_SPEC_HASH] != part.spec_hash
    # A pod kept from before pods carried their template's hash: only its generation can tell.
    return labels.get(LABEL_GENERATION) != str(generation)


def _pod_manifest(pod_name: str, dgd_name: str, generation: int, part: Component) -> dict[str, Any]:
    gpus = {"nvidia.com/gpu": str(part.gpus_per_pod)} if part.gpus_per_pod else {}
    container: dict[str, Any] = {"name": "main", "image": part.image or "nvcr.io/nvidia/ai-dynamo/runtime:sim",
                                 "resources": {"limits": gpus, "requests": gpus}}
    if part.command:
        container["command"] = list(part.command)
    if part.args:
        container["args"] = list(part.args)
    if part.env:
        container["env"] = [{"name": k, "value": v} for k, v in part.env.items()]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "labels": {
            LABEL_DGD: dgd_name, LABEL_COMPONENT: part.name, LABEL_COMPONENT_TYPE: part.type,
            LABEL_GENERATION: str(generation), LABEL_SPEC_HASH: part.spec_hash,
            "app.kubernetes.io/managed-by": "dynamo-operator"}},
        "spec": {"containers": [container], "nodeSelector": dict(part.node_selector), "restartPolicy": "Always"},
        "status": {"phase": "Pending"},
    }


def _pod_gpus(pod: dict[str, Any]) -> int:
    return sum(int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
               for c in pod["spec"].get("containers") or [])


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _pick_node(free: dict[str, dict[str, Any]], part: Component) -> str | None:
    for name, node in sorted(free.items()):
        if _selects(part.node_selector, node["labels"]) and node["free"] >= part.gpus_per_pod:
            return name
    return None


def _pod_ready(pod: dict[str, Any]) -> bool:
    return all(c.get("ready") for c in (pod.get("status") or {}).get("containerStatuses") or [{}])


def _pod_running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _condition(kind: str, status: str, reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    out = {"type": kind, "status": status, "lastTransitionTime": now()}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


_TIME_KEYS = ("lastTransitionTime", "startedAt", "finishedAt")


def _without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in _TIME_KEYS and v is not None}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def _keep_times(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """Keep condition transition times when a condition did not change, as the kubelet does."""
    before = {c["type"]: c for c in (old or {}).get("conditions") or []}
    for cond in new.get("conditions") or []:
        prev = before.get(cond["type"])
        if prev and prev.get("status") == cond["status"]:
            cond["lastTransitionTime"] = prev.get("lastTransitionTime", cond["lastTransitionTime"])
    return new

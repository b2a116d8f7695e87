"""Several simulated Kubernetes clusters with the Dynamo operator, served from one process.

    with SimulatedClusters(default_cluster_specs(), home=tmp_path, operator_delay=0.2) as sim:
        api = kubernetes.config.new_client_from_config(config_file=str(sim.kubeconfig_path),
                                                       context=sim.context("sim-east"))
        sim.faults("sim-east").crash_loop = True
        sim.cluster("sim-east").dgds()

Each cluster's objects live in `<home>/state/<cluster>.json` (see `StoreFile`): a cluster started
again on the same home finds its deployments, pods and nodes where it left them, and the operator
takes them over, frontends included. `persist=False` keeps a cluster in memory only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import socket
import threading
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from pydantic import BaseModel, Field

from sim.kube.faults import Faults
from sim.kube.frontend import Frontends
from sim.kube.load_model import LoadSettings
from sim.kube.operator import FRONTEND_URL_ANNOTATION, SimulatedOperator
from sim.kube.resources import CORE_TYPES, crd_dir, load_crds
from sim.kube.server import build_app
from sim.kube.setup import ClusterSetup
from sim.kube.store import ClusterStore, StoreFile, WriteOptions
from sim.kube.tls import ServerTls, make_server_tls

# The node shapes the stand-in clusters offer, as NVIDIA's GPU feature discovery labels them. The
# stand-in keeps its own table (it imports nothing of the product), so a product mistake in mapping
# labels to cards shows up against it instead of being mirrored by it.
NODE_SHAPES: dict[str, tuple[str, int]] = {  # card id -> (nvidia.com/gpu.product, GPUs per node)
    "h100": ("NVIDIA-H100", 8),
    "h200": ("NVIDIA-H200", 8),
    "b200": ("NVIDIA-B200", 8),
    "b300": ("NVIDIA-B300", 8),
    "gb200": ("NVIDIA-GB200", 4),
    "gb300": ("NVIDIA-GB300", 4),
}


class NodePool(BaseModel):
    name: str = Field(description="short pool name used in node names, e.g. `h200`")
    count: int = Field(ge=1)
    gpus_per_node: int = Field(ge=0)
    gpu_product: str = Field(description="`nvidia.com/gpu.product` label value, e.g. `NVIDIA-H200`")
    arch: str = "amd64"

    @classmethod
    def of(cls, hardware_id: str, count: int, arch: str = "amd64") -> NodePool:
        try:
            product, gpus = NODE_SHAPES[hardware_id.lower()]
        except KeyError:
            raise ValueError(f"no simulated node shape for {hardware_id!r}; known: {', '.join(NODE_SHAPES)}") from None
        return cls(name=hardware_id.lower(), count=count, gpus_per_node=gpus, gpu_product=product, arch=arch)


# What a member cluster set up for serving has besides its nodes (docs/member-clusters.md): the Hub token
# Secret in each namespace named, and the Dynamo operator running in its own namespace.
HF_TOKEN_SECRET = "hf-token"
OPERATOR_NAMESPACE = "dynamo-system"
OPERATOR_IMAGE = "nvcr.io/nvidia/ai-dynamo/kubernetes-operator:1.3.0"
OPERATOR_LABELS = {"app.kubernetes.io/name": "dynamo-operator", "control-plane": "controller-manager"}


class ClusterSpec(BaseModel):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    region: str
    node_pools: list[NodePool]
    namespaces: list[str] = Field(default_factory=lambda: ["default"])
    hf_token_secret: str | None = Field(HF_TOKEN_SECRET, description="a Secret of this name (key HF_TOKEN, a "
                                        "dummy value) is made in each namespace at start where it is missing (so "
                                        "clusters saved before it existed get it too); None: none")
    setup: ClusterSetup = Field(default_factory=ClusterSetup, description="the CRDs served and the user's Role")


def default_cluster_specs() -> list[ClusterSpec]:
    """`wingsmith up`'s clusters: two H200 regions and one GB200 NVL4 rack."""
    return [
        ClusterSpec(name="sim-east", region="us-east", node_pools=[NodePool.of("h200", 4)]),
        ClusterSpec(name="sim-west", region="us-west", node_pools=[NodePool.of("h200", 4)]),
        ClusterSpec(name="sim-nvl", region="us-central", node_pools=[NodePool.of("gb200", 8, arch="arm64")]),
    ]


class SimulatedCluster:
    """One cluster's state; the inspection methods are safe to call from any thread."""

    def __init__(self, spec: ClusterSpec, crds: tuple, server_url: str, frontend_base_url: str,
                 frontends: Frontends, operator_delay: float, strict_fields: bool, state_file: StoreFile | None = None):
        self.spec = spec
        self.name = spec.name
        self.server_url = server_url
        self.frontend_base_url = frontend_base_url
        self.token = secrets.token_urlsafe(24)
        self.user = f"{spec.name}-admin"  # the kubeconfig's user, as RBAC messages name it
        self.faults = Faults()
        self.setup = spec.setup.model_copy(deep=True)
        self.load = LoadSettings()  # load profiles set from a test or the admin route (load_model.py)
        frontends.use_settings(spec.name, self.load)
        self.crds = {doc["metadata"]["name"]: doc for doc, _ in crds}
        self.store = ClusterStore([*CORE_TYPES, *(rt for _, rt in crds)], strict_by_default=strict_fields)
        self.operator = SimulatedOperator(spec.name, self.store, self.faults, frontends, frontend_base_url,
                                          delay=operator_delay)
        self._frontends = frontends
        self.state_file = state_file
        if state_file is not None and state_file.load(self.store):
            self.operator.adopt()
        self._seed()

    def _seed(self) -> None:
        """Namespaces and nodes the spec names; on a restarted cluster only the ones it lacks."""
        ns = self.store.type_of("", "namespaces")
        for name in dict.fromkeys(["default", "kube-system", *self.spec.namespaces]):
            if not self.store.exists(ns, None, name):
                self.store.create(ns, "v1", None, {"metadata": {"name": name}}, WriteOptions(manager="sim"))
        if self.spec.hf_token_secret:
            secret_type = self.store.type_of("", "secrets")
            for namespace in dict.fromkeys(["default", *self.spec.namespaces]):
                if not self.store.exists(secret_type, namespace, self.spec.hf_token_secret):
                    self.store.create(secret_type, "v1", namespace, {
                        "metadata": {"name": self.spec.hf_token_secret, "namespace": namespace},
                        "type": "Opaque", "stringData": {"HF_TOKEN": "hf_simulated_not_a_real_token"}},
                        WriteOptions(manager="sim"))
        if not self.store.exists(ns, None, OPERATOR_NAMESPACE):
            self.store.create(ns, "v1", None, {"metadata": {"name": OPERATOR_NAMESPACE}}, WriteOptions(manager="sim"))
        pods = self.store.type_of("", "pods")
        operator_pod = "dynamo-operator-controller-manager-0"
        if not self.store.exists(pods, OPERATOR_NAMESPACE, operator_pod):
            self.store.create(pods, "v1", OPERATOR_NAMESPACE, {
                "metadata": {"name": operator_pod, "namespace": OPERATOR_NAMESPACE, "labels": dict(OPERATOR_LABELS)},
                "spec": {"containers": [{"name": "manager", "image": OPERATOR_IMAGE}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                           "containerStatuses": [{"name": "manager", "ready": True, "restartCount": 0,
                                                  "image": OPERATOR_IMAGE, "state": {"running": {}}}]}},
                WriteOptions(manager="sim"))
        nodes = self.store.type_of("", "nodes")
        for pool in self.spec.node_pools:
            for i in range(pool.count):
                node = _node(self.spec, pool, i)
                if not self.store.exists(nodes, None, node["metadata"]["name"]):
                    self.store.create(nodes, "v1", None, node, WriteOptions(manager="sim"))

    def save(self) -> bool:
        """Write the cluster's objects to its state file if anything changed (no-op in memory only)."""
        return self.state_file.save(self.store) if self.state_file else False

    # ---- inspection ----------------------------------------------------------------------------

    def dgds(self, namespace: str | None = None, labels: str | None = None) -> list[dict[str, Any]]:
        rt = self.store.type_of("nvidia.com", "dynamographdeployments")
        return self.store.list(rt, rt.storage_version, namespace, labels)["items"]

    def dgd(self, namespace: str, name: str) -> dict[str, Any]:
        rt = self.store.type_of("nvidia.com", "dynamographdeployments")
        return self.store.get(rt, rt.storage_version, namespace, name)

    def pods(self, namespace: str | None = None, labels: str | None = None) -> list[dict[str, Any]]:
        return self.store.list(self.store.type_of("", "pods"), "v1", namespace, labels)["items"]

    def nodes(self) -> list[dict[str, Any]]:
        return self.store.list(self.store.type_of("", "nodes"), "v1")["items"]

    def gpus_in_use(self) -> dict[str, int]:
        used = {n["metadata"]["name"]: 0 for n in self.nodes()}
        for pod in self.pods():
            node = pod["spec"].get("nodeName")
            for c in pod["spec"].get("containers") or []:
                if node in used:
                    used[node] += int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
        return used

    def frontend_url(self, namespace: str, name: str) -> str:
        """Where the DGD's frontend answers; also on the DGD as annotation `sim.wingsmith.dev/frontend-url`."""
        return self.operator.frontend_url(namespace, name)

    def load_report(self, namespace: str, name: str, window: float = 60.0) -> dict[str, Any] | None:
        """What the deployment's simulated engine sees (its `/sim/load` body), None while no frontend runs."""
        frontend = self._frontends.get(self.name, namespace, name)
        return None if frontend is None else self._frontends.engine(frontend).report(window)

    def describe(self) -> dict[str, Any]:
        return {"server": self.server_url, "frontend_base_url": self.frontend_base_url, "region": self.spec.region,
                "nodes": len(self.nodes()), "faults": self.faults.model_dump(),
                "setup": self.setup.model_dump(by_alias=True, exclude_none=True),
                "frontends": [f"{f.namespace}/{f.name}" for f in self._frontends.running(self.name)]}


def _node(spec: ClusterSpec, pool: NodePool, index: int) -> dict[str, Any]:
    name = f"{spec.name}-{pool.name}-{index}"
    resources = {"cpu": "128", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(pool.gpus_per_node)}
    return {"metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "kubernetes.io/arch": pool.arch, "kubernetes.io/os": "linux",
        "topology.kubernetes.io/region": spec.region, "topology.kubernetes.io/zone": f"{spec.region}-a",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": pool.gpu_product,
        "nvidia.com/gpu.count": str(pool.gpus_per_node)}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": dict(resources),
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "kubelet is posting ready status"}],
                   "addresses": [{"type": "Hostname", "address": name}]}}


class SimulatedClusters:
    def __init__(self, specs: list[ClusterSpec] | None = None, home: Path | str = Path(".wingsmith/sim"),
                 operator_delay: float = 1.0, *, host: str = "127.0.0.1", port: int = 0,
                 crd_directory: Path | None = None, tick: float = 0.05, strict_fields: bool = True,
                 persist: bool = True, save_interval: float = 0.1, kubeconfig_path: Path | str | None = None,
                 api_port: int = 0):
        specs = specs if specs is not None else default_cluster_specs()
        names = [s.name for s in specs]
        if len(set(names)) != len(names) or not names:
            raise ValueError(f"cluster names must be present and unique, got {names}")
        self.home = Path(home)
        self.operator_delay = operator_delay
        self._specs = specs
        self._tick = tick
        # proto must be IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose
        # proto says TCP, and without it every response waits ~40 ms on Nagle + delayed ACK.
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.host, self.port = self._socket.getsockname()[:2]
        # Frontends and the admin routes on plain HTTP (as a model server behind an ingress may be); the
        # Kubernetes API on HTTPS with a CA of its own, as kubectl needs (tls.py).
        self.base_url = f"http://{host}:{self.port}"
        self._api_socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._api_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._api_socket.bind((host, api_port))
        self.api_port = self._api_socket.getsockname()[1]
        self.api_base_url = f"https://{host}:{self.api_port}"
        self.tls: ServerTls | None = None
        self.frontends = Frontends()
        crds = load_crds(crd_dir(crd_directory))
        self.state_dir = self.home / "state"
        self._save_interval = save_interval
        self._clusters = {s.name: SimulatedCluster(s, crds, f"{self.api_base_url}/clusters/{s.name}",
                                                   f"{self.base_url}/frontends/{s.name}", self.frontends,
                                                   operator_delay, strict_fields,
                                                   StoreFile(self.state_dir / f"{s.name}.json") if persist else None)
                          for s in specs}
        # A plane takes kubeconfig files only from its own kubeconfig directory: `up` writes this one there.
        self.kubeconfig_path = Path(kubeconfig_path) if kubeconfig_path else self.home / "kubeconfig"
        self._thread: threading.Thread | None = None
        self._server: uvicorn.Server | None = None
        self._api_server: uvicorn.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ---- lookup --------------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return list(self._clusters)

    def cluster(self, name: str) -> SimulatedCluster:
        try:
            return self._clusters[name]
        except KeyError:
            raise KeyError(f"no simulated cluster {name!r}; have {self.names}") from None

    def context(self, name: str) -> str:
        return self.cluster(name).name

    def faults(self, name: str) -> Faults:
        return self.cluster(name).faults

    def setup(self, name: str) -> ClusterSetup:
        return self.cluster(name).setup

    def load(self, name: str) -> LoadSettings:
        """The cluster's load profiles: `sim.load("sim-east").deployments = {"default/my-dgd": LoadProfile(...)}`."""
        return self.cluster(name).load

    @property
    def ca_file(self) -> Path:
        """The CA that signed the Kubernetes API's certificate (also in the kubeconfig), once started."""
        if self.tls is None:
            raise RuntimeError("the simulated clusters have not started")
        return self.tls.ca_file

    def api_client(self, name: str):  # -> kubernetes.client.ApiClient
        from kubernetes import config
        return config.new_client_from_config(config_file=str(self.kubeconfig_path), context=self.context(name))

    # ---- lifecycle -----------------------------------------------------------------------------

    def start(self) -> SimulatedClusters:
        if self._thread:
            return self
        self.tls = make_server_tls(self.home / "tls", self.host)
        self._write_files()
        self._thread = threading.Thread(target=self._run, name="simulated-clusters", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30) or self._error:
            raise RuntimeError(f"simulated clusters did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        for server in (self._server, self._api_server):
            if server:
                server.should_exit = True
        if self._api_server:
            # Closing a TLS connection waits for the client's close_notify (up to 30 s), which a client
            # keeping its pool never sends: a real API server going away does not wait for it either.
            self._api_server.force_exit = True
        if self._thread:
            self._thread.join(timeout=10)
            self._thread = None
        self._socket.close()
        self._api_socket.close()
        self.save()  # the last writes, after the server and operators stopped making any

    def save(self) -> None:
        for cluster in self._clusters.values():
            cluster.save()

    def __enter__(self) -> SimulatedClusters:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        assert self.tls is not None
        app = build_app(self._clusters, self.frontends)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=120)
        api_config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                    timeout_keep_alive=120, ssl_certfile=str(self.tls.cert_file),
                                    ssl_keyfile=str(self.tls.key_file))
        self._server, self._api_server = uvicorn.Server(config), uvicorn.Server(api_config)
        operators = [asyncio.create_task(c.operator.run(self._tick)) for c in self._clusters.values()]
        operators.append(asyncio.create_task(self._keep_saving()))
        serving = [asyncio.create_task(self._server.serve(sockets=[self._socket])),
                   asyncio.create_task(self._api_server.serve(sockets=[self._api_socket]))]
        # uvicorn exposes readiness only as a flag, not an event to await.
        while not (self._server.started and self._api_server.started) and not any(  # noqa: ASYNC110
                task.done() for task in serving):
            await asyncio.sleep(0.01)
        self._ready.set()
        try:
            done, _ = await asyncio.wait(serving, return_when=asyncio.FIRST_COMPLETED)
            for server in (self._server, self._api_server):  # one stopped (or failed): stop the other
                server.should_exit = True
            await asyncio.gather(*serving, return_exceptions=True)
            for task in done:
                task.result()
        finally:
            for task in operators:
                task.cancel()
            await asyncio.gather(*operators, return_exceptions=True)

    async def _keep_saving(self) -> None:
        """Changed clusters reach their files within `save_interval`, written off the event loop
        (a stop writes the rest); a cluster killed outright loses at most that much."""
        while True:
            await asyncio.sleep(self._save_interval)
            try:
                await asyncio.to_thread(self.save)
            except OSError:  # a full disk must not stop the clusters; the next pass tries again
                import logging
                logging.getLogger(__name__).exception("saving the simulated clusters failed")

    def _write_files(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.kubeconfig_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        assert self.tls is not None
        ca = base64.b64encode(self.tls.ca_pem).decode()
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "current-context": self.names[0],
            "clusters": [{"name": c.name, "cluster": {"server": c.server_url, "certificate-authority-data": ca}}
                         for c in self._clusters.values()],
            "users": [{"name": c.user, "user": {"token": c.token}} for c in self._clusters.values()],
            "contexts": [{"name": c.name, "context": {"cluster": c.name, "user": c.user,
                                                      "namespace": "default"}} for c in self._clusters.values()],
        }
        fd = os.open(self.kubeconfig_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(kubeconfig, fh, sort_keys=False)
        # No tokens here: this file tells other processes where things are, the kubeconfig grants access.
        (self.home / "clusters.json").write_text(json.dumps({
            "kubeconfig": str(self.kubeconfig_path.resolve()), "admin_url": f"{self.base_url}/admin/clusters",
            "certificate_authority": str(self.tls.ca_file.resolve()),
            "frontend_url_annotation": FRONTEND_URL_ANNOTATION,
            "clusters": {c.name: {"context": c.name, "region": c.spec.region, "server": c.server_url,
                                  "frontend_base_url": c.frontend_base_url} for c in self._clusters.values()},
        }, indent=2))

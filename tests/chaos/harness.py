"""The chaos run: many workloads and endpoints across the three simulated clusters while the worker
is SIGKILLed and restarted at random, the clusters answer some calls with 500s and latency, the Hub
rate-limits, and Postgres is restarted once; every fifth workload is then scaled to 2 replicas and back
under the same faults, and one workload that cannot be placed is expected to fail. Then what happens
outside the plane: DGDs deleted and edited through the Kubernetes API, a cluster unreachable for a
while, and the whole plane stopped (SIGTERM, as `up` is stopped) and started again on the same home;
each must heal, and the time from the fault to serving again is measured. After each step it
checks what must hold whatever happened:

- every workload is serving, or failed with a cause — as the registry says and as its workflow says;
- exactly one DGD per (workload, cluster) that serves it, and none for anything else;
- every endpoint's gateway route lists exactly the serving deployments of its workloads;
- deleting everything leaves no DGD, no gateway route, no deployment row and no running workflow.

Anything that breaks one of these is counted as lost. `run_chaos(ChaosConfig(...))` returns a
`ChaosReport`; bench/chaos.py runs it at full size and tests/chaos runs a small one.

Everything but the worker and Postgres runs in this process (the API in-process over ASGI, the
simulated clusters and Hub on threads), so the checks can read the emulator directly. The worker is
a subprocess so it can be SIGKILLed; Postgres is a subprocess so it can be stopped and started on
the same data directory and port.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field

from bench.stats import pct
from contracts.draft_performance import WORKFLOW as DRAFT_PERFORMANCE_WORKFLOW

# Small models that fit one H200 or one GB200 GPU, so 30 workloads fit the three clusters' 96 GPUs.
DEFAULT_MODELS = ("openai/gpt-oss-120b", "openai/gpt-oss-20b")
TOKENS = {
    "chaos-operator": {"name": "olga", "roles": ["operator"]},
    "chaos-approver": {"name": "ana", "roles": ["approver"]},
    "chaos-admin": {"name": "root", "roles": ["admin"]},
}
_OPERATOR, _APPROVER, _ADMIN = ("chaos-operator", "chaos-approver", "chaos-admin")


class ChaosConfig(BaseModel):
    workloads: int = Field(30, ge=1)
    workloads_per_endpoint: int = Field(3, ge=1)
    models: tuple[str, ...] = DEFAULT_MODELS
    hardware: tuple[str, ...] = ("h200", "gb200", "h200")  # cycled over the workloads
    seed: int = 20240612
    # Worker kills: a SIGKILL after a random pause in this range (seconds), restart after another.
    kill_every: tuple[float, float] = (3.0, 8.0)
    restart_after: tuple[float, float] = (0.5, 2.0)
    max_kills: int | None = None
    postgres_restarts: int = Field(1, ge=0, le=1)
    postgres_down_seconds: float = 3.0
    api_error_rate: float = Field(0.15, ge=0, le=1)
    conflict_rate: float = Field(0.05, ge=0, le=1)
    latency: float = Field(0.05, ge=0)
    hub_rate_limits: int = Field(4, ge=0, description="429s the Hub answers before answering")
    operator_delay: float = 2.0  # as `wingsmith up`: rollouts stay in flight long enough to be hit
    poll_seconds: float = 0.3
    ready_deadline_seconds: float = 90
    drain_grace_seconds: int = 2
    # Every n-th workload is scaled to 2 replicas and back to 1 under the faults (0: none), so
    # scale-ups place anew and scale-downs drain a cluster at its endpoint before its DGD goes.
    scale_every: int = Field(5, ge=0)
    # One more workload that cannot be placed (H200 asked, only the GB200 cluster allowed): it must
    # end failed with its cause and leave nothing behind, however the faults fall.
    doomed: bool = True
    settle_timeout: float = 900
    # Faults outside the plane, once the workloads serve (0 / False: skip that one).
    out_of_band_deletes: int = Field(3, ge=0, description="serving workloads whose DGD is deleted by hand")
    out_of_band_edits: int = Field(3, ge=0, description="serving workloads whose DGD spec is edited by hand")
    overlapping_faults: bool = Field(True, description="under chat load through the gateway, one endpoint's "
                                                       "DGD edited by hand and deleted 2 s later: no failed request")
    unreachable_cluster: str | None = "sim-east"
    unreachable_seconds: float = Field(60, ge=0)
    plane_restart: bool = True
    # The watch (WINGSMITH_WATCH_*): faster than production's 10 s / 30 s so a run takes minutes.
    watch_status_seconds: float = 2.0
    watch_probe_seconds: float = 6.0
    drift_grace_seconds: float = 120
    root: Path | None = None
    verbose: bool = True


class ChaosReport(BaseModel):
    workloads: int
    serving: int = 0
    failed: int = 0
    failures: dict[str, str] = Field(default_factory=dict, description="workload → cause")
    endpoints: int = 0
    scaled: int = Field(0, description="workloads scaled up and back down under the faults")
    duration_seconds: float = 0.0
    settle_seconds: float = 0.0
    teardown_seconds: float = 0.0
    worker_kills: int = 0
    worker_restarts_survived: int = 0
    worker_crashes: list[str] = Field(default_factory=list, description="worker exits not caused by the run")
    postgres_restarts: int = 0
    hub_rate_limited_answers: int = 0
    cluster_faults_injected: dict[str, int] = Field(default_factory=dict)
    activity_retries: int = 0
    activity_failures: int = 0
    activity_timeouts: int = 0
    workflow_task_failures: int = 0
    workflow_task_timeouts: int = 0
    api_answers_while_db_down: dict[str, int] = Field(default_factory=dict)
    api_raised: dict[str, int] = Field(default_factory=dict, description="requests the API answered 500 (raised)")
    out_of_band: dict[str, int] = Field(default_factory=dict, description="faults outside the plane, by kind")
    overlap_requests: tuple[int, int] = Field((0, 0), description="chat requests sent, failed during the "
                                                                 "edit-then-delete")
    overlap_delete_during_reapply: bool | None = Field(None, description="the edit-then-delete's delete landed "
                                                                         "while the plane's re-apply waited for "
                                                                         "readiness (None: not run)")
    overlap_delete_after_edit_seconds: float | None = Field(None, description="seconds from the edit to the delete")
    heal_seconds: dict[str, list[float]] = Field(default_factory=dict,
                                                 description="fault kind → seconds from the fault to serving again")
    lost: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.lost

    def lines(self) -> list[str]:
        out = [
            f"workloads           {self.workloads} ({self.serving} serving, {self.failed} failed with a cause)",
            f"endpoints           {self.endpoints}",
            f"scaled 1 → 2 → 1    {self.scaled}",
            f"duration            {self.duration_seconds:.1f} s (settle {self.settle_seconds:.1f} s, "
            f"teardown {self.teardown_seconds:.1f} s)",
            f"worker              {self.worker_kills} SIGKILLs, {self.worker_restarts_survived} restarts survived "
            f"({len(self.worker_crashes)} after exiting by itself)",
            f"postgres restarts   {self.postgres_restarts}",
            f"hub 429s answered   {self.hub_rate_limited_answers}",
            f"cluster faults      {self.cluster_faults_injected or 'none'}",
            f"activity retries    {self.activity_retries} (attempts after the first; "
            f"{self.activity_failures} activities failed for good, {self.activity_timeouts} timed out for good)",
            f"workflow tasks      {self.workflow_task_failures} failed, {self.workflow_task_timeouts} timed out",
            f"api while db down   {dict(sorted(self.api_answers_while_db_down.items())) or 'not probed'}",
            f"api raised (500s)   {self.api_raised or 'never'}",
            f"out of band         {self.out_of_band or 'none'}",
            f"edit then delete    {self.overlap_requests[1]} of {self.overlap_requests[0]} chat requests failed"
            + ("" if self.overlap_delete_during_reapply is None else
               f"; deleted {self.overlap_delete_after_edit_seconds or 0:.1f} s after the edit, "
               + ("while the plane re-applied it" if self.overlap_delete_during_reapply
                  else "NOT while the plane re-applied it")),
            *(f"time to heal        {kind}: p50 {pct(v, 50):.1f} s, p99 {pct(v, 99):.1f} s, max {max(v):.1f} s "
              f"({len(v)})" for kind, v in sorted(self.heal_seconds.items()) if v),
            f"lost                {len(self.lost)}",
        ]
        out += [f"  failed: {w}: {c}" for w, c in sorted(self.failures.items())]
        out += [f"  worker crash: {c}" for c in self.worker_crashes]
        out += [f"  LOST: {item}" for item in self.lost]
        return out


# --- the pieces --------------------------------------------------------------------------------------


@dataclass
class _Worker:
    """The worker as a subprocess, so it can be SIGKILLed like a crashed pod."""
    env: dict[str, str]
    log_dir: Path
    process: subprocess.Popen | None = None
    starts: int = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.log_dir / f"worker-{self.starts}.log", "wb")
        self.process = subprocess.Popen([sys.executable, "-m", "worker"], env=self.env, stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        from wingsmith.local.temporal_server import stop_process
        stop_process(self.process, 15)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class _Bed:
    config: ChaosConfig
    root: Path
    pg: Any = None
    temporal_server: Any = None
    hub: Any = None
    sims: Any = None
    gateway: subprocess.Popen | None = None
    gateway_url: str = ""
    gateway_token_ref: str = ""
    worker: _Worker | None = None
    pool: Any = None
    client: Any = None
    api: httpx.AsyncClient | None = None
    settings: Any = None
    db_down: asyncio.Event = field(default_factory=asyncio.Event)
    api_raised: Counter = field(default_factory=Counter)
    faults_before_restart: Counter = field(default_factory=Counter)


def _say(config: ChaosConfig, text: str) -> None:
    if config.verbose:
        print(f"[chaos {time.strftime('%H:%M:%S')}] {text}", flush=True)


def _start_bed(config: ChaosConfig) -> _Bed:
    from sim.hub import start_hub_server
    from sim.kube import SimulatedClusters, default_cluster_specs
    from wingsmith.local.ports import free_port
    from wingsmith.local.postgres import LocalPostgres
    from wingsmith.local.temporal_server import TemporalDevServer

    root = Path(config.root or tempfile.mkdtemp(prefix="wingsmith-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    bed = _Bed(config=config, root=root)
    bed.pg = LocalPostgres(root / "pg", free_port(), durable=False, log_file=root / "logs" / "postgres.log").start()
    # On disk, so the whole-plane restart keeps the workflows, as `up` keeps them in its home.
    bed.temporal_server = TemporalDevServer(port=free_port(), ui_port=None,
                                            db_file=root / "temporal.db" if config.plane_restart else None,
                                            log_file=root / "logs" / "temporal.log").start()
    bed.hub = start_hub_server()
    bed.sims = SimulatedClusters(default_cluster_specs(), home=root / "sim",
                                 operator_delay=config.operator_delay).start()
    token_file = root / "gateway-admin-token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("chaos-gateway-" + os.urandom(8).hex())
    bed.gateway_token_ref = f"file:{token_file}"
    bed.gateway_url = f"http://127.0.0.1:{free_port()}"
    _start_gateway(bed)
    return bed


def _start_gateway(bed: _Bed) -> None:
    from wingsmith.local.temporal_server import wait_for_port
    port = int(bed.gateway_url.rsplit(":", 1)[1])
    log = open(bed.root / "logs" / "gateway.log", "ab")
    bed.gateway = subprocess.Popen(
        [sys.executable, "-m", "gateway", "--port", str(port), "--state-dir", str(bed.root / "gateway"),
         "--admin-token-ref", bed.gateway_token_ref, "--log-level", "WARNING"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    wait_for_port("127.0.0.1", port, 30, bed.gateway, "gateway")


def _stop_bed(bed: _Bed) -> None:
    from wingsmith.local.temporal_server import stop_process
    if bed.worker is not None:
        bed.worker.stop()
    stop_process(bed.gateway, 10)
    for part in (bed.sims, bed.hub, bed.temporal_server, bed.pg):
        if part is not None:
            try:
                part.stop()
            except Exception:  # noqa: BLE001 - stopping the rest matters more
                pass


async def _connect(bed: _Bed) -> None:
    from api.app import create_app
    from api.auth import TokenTable
    from wingsmith.adapters.store.db import migrate, open_pool
    from wingsmith.adapters.temporal import connect
    from wingsmith.domain.config import Settings

    c = bed.config
    bed.settings = Settings(
        home=bed.root / "home", database_url=bed.pg.dsn(), temporal_address=bed.temporal_server.address,
        hf_endpoint=bed.hub.url, task_queue="chaos", kube_task_queue="chaos-kube", auth_tokens=json.dumps(TOKENS),
        log_format="json", log_level="ERROR", rollout_poll_seconds=c.poll_seconds,
        ready_deadline_seconds=c.ready_deadline_seconds, gateway_url=bed.gateway_url,
        gateway_admin_token_ref=bed.gateway_token_ref, drain_grace_seconds=c.drain_grace_seconds,
        hf_token_secret=None, watch_status_seconds=c.watch_status_seconds, watch_probe_seconds=c.watch_probe_seconds,
        drift_grace_seconds=c.drift_grace_seconds, kubeconfig_dir=bed.root)
    bed.pool = await open_pool(bed.pg.dsn())
    await migrate(bed.pool)
    bed.client = await connect(bed.settings, address=bed.temporal_server.address)
    app = create_app(bed.settings, tokens=TokenTable.from_json(bed.settings.auth_tokens), db=bed.pool,
                     temporal=bed.client)
    bed.api = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                base_url="http://api", timeout=60)
    s = bed.settings
    env = dict(os.environ, DATABASE_URL=bed.pg.dsn(), TEMPORAL_ADDRESS=bed.temporal_server.address,
               WINGSMITH_HOME=str(bed.root / "worker-home"), WINGSMITH_TASK_QUEUE=s.task_queue,
               WINGSMITH_KUBE_TASK_QUEUE=s.kube_task_queue, WINGSMITH_HF_ENDPOINT=s.hf_endpoint,
               WINGSMITH_LOG_FORMAT="json", WINGSMITH_LOG_LEVEL="INFO",
               WINGSMITH_ROLLOUT_POLL_SECONDS=str(c.poll_seconds),
               WINGSMITH_READY_DEADLINE_SECONDS=str(c.ready_deadline_seconds),
               WINGSMITH_GATEWAY_URL=bed.gateway_url, WINGSMITH_GATEWAY_ADMIN_TOKEN_REF=bed.gateway_token_ref,
               WINGSMITH_DRAIN_GRACE_SECONDS=str(c.drain_grace_seconds),
               WINGSMITH_KUBECONFIG_DIR=str(bed.root))  # the sims' kubeconfig is under it
    env.pop("WINGSMITH_AUTH_TOKENS", None)
    bed.worker = _Worker(env=env, log_dir=bed.root / "logs")
    bed.worker.start()


# --- talking to the API like a client that retries ---------------------------------------------------


async def _call(bed: _Bed, method: str, path: str, token: str, *, ok: tuple[int, ...] = (200, 201, 202),
                json_body: dict | None = None, params: dict | None = None, attempts: int = 60,
                what: str = "") -> httpx.Response:
    """A client that retries what is worth retrying (429, 5xx, transport errors), honouring Retry-After."""
    last = None
    for attempt in range(attempts):
        try:
            r = await bed.api.request(method, path, json=json_body, params=params,
                                      headers={"Authorization": f"Bearer {token}"})
        except Exception as exc:  # noqa: BLE001 - the in-process app's own error: an answer of 500
            last = f"the API raised {type(exc).__name__}: {exc}"
            bed.api_raised[f"{method} {path.split('/')[2] if path.count('/') > 1 else path}: "
                           f"{type(exc).__name__}"] += 1
            await asyncio.sleep(min(0.2 * 2 ** attempt, 2))
            continue
        if r.status_code in ok:
            return r
        last = f"HTTP {r.status_code}: {r.text[:300]}"
        if r.status_code == 429 or r.status_code >= 500:
            wait = float(r.headers.get("Retry-After") or 0) or min(0.2 * 2 ** attempt, 2)
            await asyncio.sleep(min(wait, 5))
            continue
        break
    raise RuntimeError(f"{what or method + ' ' + path}: {last}")


async def _register_clusters(bed: _Bed) -> None:
    for name in bed.sims.names:
        spec = bed.sims.cluster(name).spec
        await _call(bed, "POST", "/v1/clusters", _ADMIN, ok=(200, 201), what=f"register {name}", json_body={
            "name": name, "region": spec.region, "kubeconfig": str(bed.sims.kubeconfig_path),
            "kube_context": bed.sims.context(name), "frontend_base_url": f"{bed.sims.base_url}/frontends/{name}",
            "labels": {"simulated": "true"}})


async def _register_and_approve(bed: _Bed, model: str) -> str:
    r = await _call(bed, "POST", "/v1/artifacts", _OPERATOR, json_body={"source": f"hf:{model}"},
                    what=f"register {model}")
    artifact = r.json()["id"]
    org, rest = artifact.split("/", 1)
    deadline = time.monotonic() + 180
    while True:
        got = await _call(bed, "GET", f"/v1/artifacts/{org}/{rest}", _OPERATOR, what=f"read {artifact}")
        body = got.json()
        if body.get("state") == "approved":
            return artifact
        if body.get("state") == "draft" and body.get("draft"):
            break
        if body.get("state") in ("rejected", "expired", "failed"):
            raise RuntimeError(f"{artifact} ended {body.get('state')} before review")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{artifact} never reached its draft (state {body.get('state')})")
        await asyncio.sleep(0.3)
    await _call(bed, "POST", f"/v1/artifacts/{org}/{rest}/review", _APPROVER, ok=(200,), what=f"approve {artifact}",
                json_body={"decision": "approve", "draft_version": body["draft"]["version"],
                           "comment": "chaos run"})
    return artifact


# --- chaos -------------------------------------------------------------------------------------------


class _Chaos:
    def __init__(self, bed: _Bed, report: ChaosReport):
        self.bed, self.report = bed, report
        self.rng = random.Random(bed.config.seed)
        self.stopped = asyncio.Event()
        self.worker_lock = asyncio.Lock()

    async def kill_worker_loop(self) -> None:
        c = self.bed.config
        while not self.stopped.is_set():
            if c.max_kills is not None and self.report.worker_kills >= c.max_kills:
                return
            if await self._sleep(self.rng.uniform(*c.kill_every)):
                return
            async with self.worker_lock:
                self.bed.worker.kill()
                self.report.worker_kills += 1
                _say(c, f"SIGKILLed the worker ({self.report.worker_kills})")
                await asyncio.sleep(self.rng.uniform(*c.restart_after))
                self.bed.worker.start()

    async def supervise_worker(self) -> None:
        """Restart a worker that ended by itself, as `wingsmith up` does, and note it: it is not lost
        work, but it is a crash the run did not cause directly."""
        worker = self.bed.worker
        while not self.stopped.is_set():
            await asyncio.sleep(0.5)
            async with self.worker_lock:
                if worker.process is not None and worker.process.poll() is not None:
                    self.report.worker_crashes.append(
                        f"worker {worker.starts} exited {worker.process.returncode} by itself; "
                        f"see {worker.log_dir}/worker-{worker.starts}.log")
                    _say(self.bed.config, f"the worker exited {worker.process.returncode} by itself; restarting it")
                    await asyncio.sleep(1)
                    worker.start()

    async def restart_postgres(self, after: float) -> None:
        c = self.bed.config
        if c.postgres_restarts < 1 or await self._sleep(after):
            return
        _say(c, "stopping Postgres")
        await asyncio.to_thread(self.bed.pg.stop)
        self.bed.db_down.set()
        probe = asyncio.create_task(self._probe_api_while_down())
        await asyncio.sleep(c.postgres_down_seconds)
        self.bed.db_down.clear()
        await probe
        await asyncio.to_thread(self.bed.pg.start)
        self.report.postgres_restarts += 1
        _say(c, "Postgres is back")

    async def _probe_api_while_down(self) -> None:
        """What a client sees from the API while the registry is gone (it should be 503, one shape)."""
        seen: Counter = Counter()
        while self.bed.db_down.is_set():
            try:
                r = await self.bed.api.get("/v1/workloads", headers={"Authorization": f"Bearer {_OPERATOR}"})
                shape = "error-shape" if _is_error_shape(r) else "other-body"
                seen[f"{r.status_code} {shape}"] += 1
            except Exception as exc:  # noqa: BLE001 - recorded: the API should not raise at all
                seen[type(exc).__name__] += 1
            await asyncio.sleep(0.3)
        self.report.api_answers_while_db_down = dict(seen)

    def set_cluster_faults(self, on: bool) -> None:
        c = self.bed.config
        for i, name in enumerate(self.bed.sims.names):
            faults = {"api_error_rate": c.api_error_rate, "conflict_rate": c.conflict_rate, "latency": c.latency,
                      "seed": c.seed + i} if on else {"api_error_rate": 0.0, "conflict_rate": 0.0, "latency": 0.0}
            self.bed.sims.faults(name).update(faults)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopped first; True when stopped."""
        try:
            await asyncio.wait_for(self.stopped.wait(), timeout=seconds)
            return True
        except TimeoutError:
            return False


def _is_error_shape(r: httpx.Response) -> bool:
    try:
        body = r.json()
    except ValueError:
        return False
    return isinstance(body, dict) and set(body) == {"error"} and {"code", "message"} <= set(body["error"])


# --- the run -----------------------------------------------------------------------------------------


def run_chaos(config: ChaosConfig | None = None) -> ChaosReport:
    config = config or ChaosConfig()
    bed = _start_bed(config)
    try:
        return asyncio.run(_run(bed))
    finally:
        _stop_bed(bed)


async def _run(bed: _Bed) -> ChaosReport:
    c = bed.config
    report = ChaosReport(workloads=c.workloads)
    t0 = time.monotonic()
    await _connect(bed)
    chaos = _Chaos(bed, report)
    tasks: list[asyncio.Task] = []
    try:
        await _register_clusters(bed)
        bed.hub.state.faults.set("*", rate_limited=c.hub_rate_limits, rate_limit_reset=1)
        artifacts = {}
        for model in c.models:
            artifacts[model] = await _register_and_approve(bed, model)
        report.hub_rate_limited_answers = c.hub_rate_limits - max(0, bed.hub.state.faults.plan("*").rate_limited)
        _say(c, f"approved {len(artifacts)} artifacts; creating {c.workloads} workloads")

        chaos.set_cluster_faults(True)
        tasks.append(asyncio.create_task(chaos.kill_worker_loop()))
        tasks.append(asyncio.create_task(chaos.supervise_worker()))
        names = [f"chaos-{i:02d}" for i in range(c.workloads)]
        for i, name in enumerate(names):
            # An endpoint serves one model: the workloads that share one (groups below) share a model.
            model = c.models[(i // c.workloads_per_endpoint) % len(c.models)]
            await _call(bed, "POST", "/v1/workloads", _OPERATOR, what=f"create {name}", json_body={
                "artifact_id": artifacts[model], "hardware": c.hardware[i % len(c.hardware)],
                "layout": "single_node_tp", "replicas": 1, "gpus": 1, "name": name})
        groups = [names[i:i + c.workloads_per_endpoint] for i in range(0, len(names), c.workloads_per_endpoint)]
        endpoints = [f"chaos-ep-{i:02d}" for i in range(len(groups))]
        report.endpoints = len(endpoints)
        if c.doomed:
            # H200 replicas allowed only on the GB200 cluster: valid to ask, impossible to place, so the
            # workflow must roll back and fail with a cause, under the same faults as the rest.
            await _call(bed, "POST", "/v1/workloads", _OPERATOR, what="create chaos-doomed", json_body={
                "artifact_id": artifacts[c.models[0]], "hardware": "h200", "layout": "single_node_tp",
                "replicas": 1, "gpus": 1, "name": "chaos-doomed",
                "constraints": {"allowed_clusters": ["sim-nvl"]}})
            names.append("chaos-doomed")
            report.workloads += 1
        # Postgres goes away while rollouts and endpoint passes are in flight.
        postgres = asyncio.create_task(chaos.restart_postgres(after=chaos.rng.uniform(3.0, 8.0)))
        tasks.append(postgres)
        for ep, group in zip(endpoints, groups, strict=True):
            await _wait_rows(bed, group)
            await _call(bed, "POST", "/v1/endpoints", _OPERATOR, what=f"create {ep}",
                        json_body={"name": ep, "workloads": group})
        _say(c, f"created {len(names)} workloads and {len(endpoints)} endpoints")

        t_settle = time.monotonic()
        statuses = await _settle(bed, names, c.settle_timeout)
        await postgres  # it has happened by now; waiting only collects its probe
        report.settle_seconds = time.monotonic() - t_settle
        for name, st in statuses.items():
            if st is None:
                report.lost.append(f"workload {name}: no answer from its workflow")
            elif st.stage == "serving":
                report.serving += 1
            elif st.stage == "failed":
                report.failed += 1
                report.failures[name] = st.failure or ""
                if not st.failure:
                    report.lost.append(f"workload {name}: failed without a cause")
            else:
                report.lost.append(f"workload {name}: still {st.stage} after {c.settle_timeout:.0f}s")
        _say(c, f"settled: {report.serving} serving, {report.failed} failed; checking")
        report.lost += await _check_settled(bed, statuses, dict(zip(endpoints, groups, strict=True)))
        scaled = await _scale_round_trip(bed, [n for n in names if statuses[n] and statuses[n].stage == "serving"])
        if scaled:
            report.scaled = len(scaled)
            statuses.update(await _settle(bed, scaled, c.settle_timeout))
            report.lost += [f"workload {n}: {statuses[n].stage if statuses[n] else 'no answer'} after scaling"
                            for n in scaled if not statuses[n] or statuses[n].stage != "serving"]
            report.lost += await _check_settled(bed, statuses, dict(zip(endpoints, groups, strict=True)))

        # Outside the plane: by hand through the Kubernetes API, a partition, a restart of everything.
        by_endpoint = dict(zip(endpoints, groups, strict=True))
        serving = [n for n in names if statuses[n] and statuses[n].stage == "serving"]
        for step in (lambda: _out_of_band_edits(bed, chaos, report, serving),
                     lambda: _edit_then_delete(bed, chaos, report, serving, by_endpoint),
                     lambda: _partition(bed, report, serving),
                     lambda: _restart_plane(bed, chaos, report, serving)):
            report.lost += await step()
            statuses.update(await _settle(bed, serving, c.settle_timeout))
            report.lost += [f"workload {n}: {statuses[n].stage if statuses[n] else 'no answer'} after healing"
                            for n in serving if not statuses[n] or statuses[n].stage != "serving"]
            report.lost += await _check_settled(bed, statuses, by_endpoint)

        t_down = time.monotonic()
        await _tear_down(bed, names, endpoints, statuses, chaos.rng)
        # The worker keeps being killed while the teardowns run.
        report.lost += await _wait_all_closed(bed, c.settle_timeout)
        report.teardown_seconds = time.monotonic() - t_down
        chaos.stopped.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        chaos.set_cluster_faults(False)
        report.lost += await _check_empty(bed, names, endpoints)
        await _count_history(bed, report)
        # Starts after SIGKILLs (the plane restart's graceful one is counted apart).
        report.worker_restarts_survived = bed.worker.starts - 1 - report.out_of_band.get("plane restarts", 0)
        report.cluster_faults_injected = _fault_counts(bed)
    finally:
        chaos.stopped.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if bed.api is not None:
            await bed.api.aclose()
        if bed.pool is not None:
            await bed.pool.close()
    report.api_raised = dict(bed.api_raised)
    report.duration_seconds = time.monotonic() - t0
    return report


def _fault_counts(bed: _Bed) -> dict[str, int]:
    total: Counter = Counter(bed.faults_before_restart)
    for n in bed.sims.names:
        total.update(bed.sims.faults(n).injected)
    return dict(total)


async def _wait_rows(bed: _Bed, workloads: list[str], within: float = 300) -> None:
    """An endpoint may only name workloads the registry knows; their first row comes from an activity."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            rows = await bed.pool.fetch("select id from workloads where id = any($1::text[])", workloads)
            if len(rows) == len(workloads):
                return
        except Exception:  # noqa: BLE001 - Postgres may be restarting
            pass
        await asyncio.sleep(0.3)
    raise RuntimeError(f"workload rows for {workloads} never appeared")


async def _status(bed: _Bed, name: str):
    from wingsmith.adapters.starter import workload_handle
    from workflows.workload import WorkloadWorkflow
    try:
        return await workload_handle(bed.client, name).query(WorkloadWorkflow.status,
                                                               rpc_timeout=timedelta(seconds=5))
    except Exception:  # noqa: BLE001 - a query times out while no worker runs; ask again
        return None


async def _settle(bed: _Bed, names: list[str], within: float) -> dict[str, Any]:
    """Wait until every workflow says serving or failed, and the registry says the same."""
    deadline = time.monotonic() + within
    statuses: dict[str, Any] = {n: None for n in names}
    last_log = 0.0
    while True:
        pending = [n for n in names if statuses[n] is None or statuses[n].stage not in ("serving", "failed")]
        for n, st in zip(pending, await asyncio.gather(*(_status(bed, n) for n in pending)), strict=True):
            statuses[n] = st or statuses[n]
        pending = [n for n in names if statuses[n] is None or statuses[n].stage not in ("serving", "failed")]
        if not pending:
            # Judge the registry against what every workflow says now, not what it said when it first
            # settled: a workload that settled early may have been degraded by a later look since.
            for n, st in zip(names, await asyncio.gather(*(_status(bed, n) for n in names)), strict=True):
                statuses[n] = st or statuses[n]
            settled = all(statuses[n] is not None and statuses[n].stage in ("serving", "failed") for n in names)
            if settled and await _registry_agrees(bed, statuses) == []:
                return statuses
        if time.monotonic() > deadline:
            return statuses
        if time.monotonic() - last_log > 15:
            last_log = time.monotonic()
            stages = Counter(s.stage if s else "?" for s in statuses.values())
            _say(bed.config, f"waiting: {dict(stages)}")
        await asyncio.sleep(0.5)


# --- the invariants, as pure functions over what was read ---------------------------------------------

Pair = tuple[str, str]  # (workload, cluster)


def serving_pairs(statuses: dict[str, Any]) -> set[Pair]:
    """Where each workload's workflow says it serves."""
    return {(name, c.cluster) for name, st in statuses.items() if st is not None
            for c in st.clusters if c.state == "serving"}


def registry_problems(statuses: dict[str, Any], rows: dict[str, str], recorded: set[Pair]) -> list[str]:
    """The registry (workload rows, serving deployment rows) against what each workflow says."""
    problems = []
    serving = serving_pairs(statuses)
    for name, st in sorted(statuses.items()):
        if st is None:
            continue
        if rows.get(name) != st.stage:
            problems.append(f"workload {name}: registry says {rows.get(name)}, workflow says {st.stage}")
        want = sorted(c for w, c in serving if w == name)
        have = sorted(c for w, c in recorded if w == name)
        if want != have:
            problems.append(f"workload {name}: registry serves on {have}, workflow on {want}")
    return problems


def dgd_problems(found: dict[Pair, list[str]], serving: set[Pair]) -> list[str]:
    """Exactly one DGD where a workload serves on a cluster, none anywhere else."""
    problems = []
    for key in sorted(set(found) | serving):
        have = found.get(key, [])
        if key in serving and len(have) != 1:
            problems.append(f"workload {key[0]} on {key[1]}: {len(have)} DGDs, want exactly 1")
        elif key not in serving:
            problems.append(f"workload {key[0]} on {key[1]}: orphaned DGD(s) {have}")
    return problems


def route_problems(routes: dict[str, set[str]], serving: set[Pair], endpoints: dict[str, list[str]]) -> list[str]:
    """Each endpoint routes to exactly the serving deployments of its workloads (backend id
    `<cluster>/<workload>`), and the gateway holds no route for anything else."""
    problems = []
    for ep, group in sorted(endpoints.items()):
        want = {f"{c}/{w}" for w, c in serving if w in group}
        have = routes.get(ep, set())
        if want != have:
            problems.append(f"endpoint {ep}: gateway routes {sorted(have)}, serving {sorted(want)}")
    problems += [f"gateway route {name} belongs to no endpoint" for name in sorted(set(routes) - set(endpoints))
                 if routes[name]]
    return problems


# --- reading the registry, the clusters and the gateway --------------------------------------------------


async def _registry_agrees(bed: _Bed, statuses: dict[str, Any]) -> list[str]:
    rows = {r["id"]: r["state"] for r in await bed.pool.fetch(
        "select id, state from workloads where id = any($1::text[])", list(statuses))}
    recorded = {(r["workload_id"], r["cluster"]) for r in await bed.pool.fetch(
        "select workload_id, cluster from deployments where workload_id = any($1::text[]) and state = 'serving'",
        list(statuses))}
    return registry_problems(statuses, rows, recorded)


def _dgds_by_workload(bed: _Bed) -> dict[Pair, list[str]]:
    """(workload, cluster) → DGD names, found by label on every cluster (not by the expected name)."""
    from wingsmith.domain.dynamo.names import LABEL_WORKLOAD
    found: dict[Pair, list[str]] = {}
    for cluster in bed.sims.names:
        for d in bed.sims.cluster(cluster).dgds():
            meta = d["metadata"]
            workload = (meta.get("labels") or {}).get(LABEL_WORKLOAD) or meta["name"]
            found.setdefault((workload, cluster), []).append(meta["name"])
    return found


async def _gateway_routes(bed: _Bed) -> dict[str, set[str]]:
    from wingsmith.adapters.gateway import LocalGatewayClient
    gw = LocalGatewayClient(bed.gateway_url, bed.gateway_token_ref)
    try:
        return {r.model_name: {b.id for b in r.backends} for r in await asyncio.to_thread(gw.get_routes)}
    finally:
        gw.close()


async def _check_settled(bed: _Bed, statuses: dict[str, Any], endpoints: dict[str, list[str]],
                         route_timeout: float = 120) -> list[str]:
    serving = serving_pairs(statuses)
    lost = await _registry_agrees(bed, statuses) + dgd_problems(_dgds_by_workload(bed), serving)
    # Endpoints reconcile on signals and on every resync period: give them a moment to catch up.
    deadline = time.monotonic() + route_timeout
    while True:
        problems = route_problems(await _gateway_routes(bed), serving, endpoints)
        if not problems or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    return lost + problems + await _chat_through_gateway(bed, [ep for ep, group in endpoints.items()
                                                               if any(w in group for w, _ in serving)])


async def _scale_round_trip(bed: _Bed, serving: list[str]) -> list[str]:
    """Every `scale_every`-th serving workload to 2 replicas and back to 1, all at once, while the
    worker is killed and the clusters fail calls. A scale is by value, so a retried call is harmless."""
    every = bed.config.scale_every
    chosen = serving[::every] if every else []
    if not chosen:
        return []
    _say(bed.config, f"scaling {len(chosen)} workloads to 2 replicas and back to 1")
    for replicas in (2, 1):
        await asyncio.gather(*(_call(bed, "PATCH", f"/v1/workloads/{name}", _OPERATOR, what=f"scale {name}",
                                     json_body={"replicas": replicas}) for name in chosen))
    return chosen


async def _chat_through_gateway(bed: _Bed, endpoints: list[str]) -> list[str]:
    """Serving means answering: one chat completion per endpoint, through the gateway."""
    problems = []
    async with httpx.AsyncClient(base_url=bed.gateway_url, timeout=30, trust_env=False) as http:
        for ep in endpoints:
            r = await http.post("/v1/chat/completions", json={
                "model": ep, "messages": [{"role": "user", "content": "chaos check"}]})
            if r.status_code != 200:
                problems.append(f"endpoint {ep}: the gateway answered {r.status_code}: {r.text[:200]}")
    return problems


async def _tear_down(bed: _Bed, names: list[str], endpoints: list[str], statuses: dict[str, Any],
                     rng: random.Random) -> None:
    """Delete every workload and endpoint, interleaved in a random order, so endpoints are deleted
    while the workloads they route to drain and go, and the other way round."""
    _say(bed.config, "deleting every workload and endpoint")
    calls = [("DELETE", f"/v1/workloads/{name}", (202, 409)) for name in names
             # A failed workload has rolled back already; its workflow has ended.
             if statuses.get(name) is None or statuses[name].stage != "failed"]
    calls += [("DELETE", f"/v1/endpoints/{ep}", (202, 404, 409)) for ep in endpoints]
    rng.shuffle(calls)
    # All at once, as many clients would: each waits only until its workflow has accepted the delete.
    await asyncio.gather(*(_call(bed, method, path, _OPERATOR, ok=ok) for method, path, ok in calls))


async def _wait_all_closed(bed: _Bed, within: float) -> list[str]:
    """Every workflow of the run ends; a workload or endpoint that ends otherwise than completed (or a
    workload's failed rollback) is lost."""
    from temporalio.client import WorkflowExecutionStatus
    deadline = time.monotonic() + within
    last_log = 0.0
    while True:
        # A draft's estimate waits (bounded, docs/planning-by-load.md) for a perf worker this bed does not
        # start: it is meant to outlive the run, so it is not counted as lost.
        running = [w.id async for w in bed.client.list_workflows(
            f"ExecutionStatus = 'Running' AND WorkflowType != '{DRAFT_PERFORMANCE_WORKFLOW}'")]
        if not running or time.monotonic() > deadline:
            break
        if time.monotonic() - last_log > 15:
            last_log = time.monotonic()
            _say(bed.config, f"waiting for {len(running)} workflows to end")
        await asyncio.sleep(1)
    lost = [f"workflow {w} still running after teardown" for w in running]
    async for w in bed.client.list_workflows():
        if w.status in (WorkflowExecutionStatus.TERMINATED, WorkflowExecutionStatus.TIMED_OUT,
                        WorkflowExecutionStatus.CANCELED):
            lost.append(f"workflow {w.id} ended {w.status.name}")
        elif w.status == WorkflowExecutionStatus.FAILED and not w.id.startswith("workload/"):
            lost.append(f"workflow {w.id} failed")
    return lost


async def _check_empty(bed: _Bed, names: list[str], endpoints: list[str]) -> list[str]:
    lost = dgd_problems(_dgds_by_workload(bed), set())
    lost += [f"gateway route {name} left with {len(backends)} backend(s)"
             for name, backends in sorted((await _gateway_routes(bed)).items())]
    for r in await bed.pool.fetch("select workload_id, cluster, state from deployments"):
        lost.append(f"deployment row {r['workload_id']} on {r['cluster']} left ({r['state']})")
    for r in await bed.pool.fetch("select id, state from workloads where id = any($1::text[])", names):
        if r["state"] not in ("deleted", "failed"):
            lost.append(f"workload {r['id']}: registry says {r['state']} after teardown")
    for r in await bed.pool.fetch("select name, state from endpoints where name = any($1::text[])", endpoints):
        if r["state"] != "deleted":
            lost.append(f"endpoint {r['name']}: registry says {r['state']} after teardown")
    # The deployments' pods: the operator's own pod is the cluster's and stays.
    from sim.kube.operator import LABEL_DGD
    pods = sum(1 for n in bed.sims.names for pod in bed.sims.cluster(n).pods()
               if LABEL_DGD in (pod["metadata"].get("labels") or {}))
    if pods:
        lost.append(f"{pods} pod(s) left on the clusters")
    return lost


async def _count_history(bed: _Bed, report: ChaosReport) -> None:
    from temporalio.api.enums.v1 import EventType
    async for w in bed.client.list_workflows():
        history = await bed.client.get_workflow_handle(w.id, run_id=w.run_id).fetch_history()
        for e in history.events:
            t = e.event_type
            if t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                report.activity_retries += max(0, e.activity_task_started_event_attributes.attempt - 1)
            elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
                report.activity_failures += 1
            elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
                report.activity_timeouts += 1
            elif t == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                report.workflow_task_failures += 1
            elif t == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                report.workflow_task_timeouts += 1


# --- faults outside the plane -------------------------------------------------------------------------


def _kube_call(bed: _Bed, cluster: str, call: Any, attempts: int = 40) -> Any:
    """What a person with kubectl does against a flaky API server: try again on 5xx and 409."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    api = bed.sims.api_client(cluster)
    try:
        custom = client.CustomObjectsApi(api)
        for attempt in range(attempts):
            try:
                return call(custom)
            except ApiException as exc:
                if exc.status not in (409, 500, 503) or attempt == attempts - 1:
                    raise
                time.sleep(0.1)
    finally:
        api.close()


def _delete_by_hand(bed: _Bed, cluster: str, name: str) -> None:
    from wingsmith.domain.dynamo import GROUP, PLURAL, VERSION
    _kube_call(bed, cluster, lambda custom: custom.delete_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, name))


def _edit_by_hand(bed: _Bed, cluster: str, name: str) -> int:
    """Point the worker at another image, as a hurried hand-fix would; returns the new generation."""
    from wingsmith.domain.dynamo import GROUP, PLURAL, VERSION

    def edit(custom: Any) -> int:
        live = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
        components = live["spec"]["components"]
        for component in components:
            for container in component.get("podTemplate", {}).get("spec", {}).get("containers", []):
                if component.get("type") != "frontend" and container.get("name") == "main":
                    container["image"] = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:hand-edited"
        edited = custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, name,
            {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"]},
             "spec": {"components": components}})
        return int(edited["metadata"]["generation"])
    return _kube_call(bed, cluster, edit)


def _live_dgds(bed: _Bed) -> dict[Pair, dict[str, Any]]:
    """(workload, cluster) → the DGD, for workloads holding exactly one there."""
    from wingsmith.domain.dynamo.names import LABEL_WORKLOAD
    found: dict[Pair, dict[str, Any]] = {}
    for cluster in bed.sims.names:
        for d in bed.sims.cluster(cluster).dgds():
            workload = (d["metadata"].get("labels") or {}).get(LABEL_WORKLOAD) or d["metadata"]["name"]
            found[(workload, cluster)] = d
    return found


def _as_applied(dgd: dict[str, Any] | None) -> bool:
    """The live spec is what the plane rendered (it hashes to the plane's annotation)."""
    from wingsmith.domain.dynamo.render import SPEC_HASH_ANNOTATION, spec_hash
    return dgd is not None and spec_hash(dgd["spec"]) == (dgd["metadata"].get("annotations") or {}).get(
        SPEC_HASH_ANNOTATION) and not dgd["metadata"].get("deletionTimestamp")


def _converged(name: str, status: Any, live: dict[Pair, dict[str, Any]]) -> bool:
    """Serving, with exactly the DGDs it serves from, each as the plane applied it: nothing left over
    on a cluster it moved away from."""
    serving = {c.cluster for c in status.clusters if c.state == "serving"}
    held = {cluster for (workload, cluster) in live if workload == name}
    return status.stage == "serving" and bool(serving) and held == serving and all(
        _as_applied(live[(name, cluster)]) for cluster in held)


async def _time_to_heal(bed: _Bed, since: float, healed: dict[str, Any]) -> tuple[list[float], list[str]]:
    """Seconds from `since` until each workload has converged and its own `healed(status, live DGDs)`
    holds; the rest are lost."""
    timeout = bed.config.settle_timeout
    times: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(times) < len(healed) and time.monotonic() < deadline:
        # All at once: a query waits up to 5 s for a workflow whose worker was just killed, and asking
        # one after another would time the queue of queries rather than the heals.
        pending = [n for n in healed if n not in times]
        answers = await asyncio.gather(*(_status(bed, n) for n in pending))
        live = _live_dgds(bed)
        for name, status in zip(pending, answers, strict=True):
            if status is not None and _converged(name, status, live) and healed[name](status, live):
                times[name] = time.monotonic() - since
        await asyncio.sleep(0.25)
    return list(times.values()), [f"workload {n}: not healed {timeout:.0f}s after the fault" for n in healed
                                  if n not in times]


async def _out_of_band_edits(bed: _Bed, chaos: _Chaos, report: ChaosReport, serving: list[str]) -> list[str]:
    """DGDs deleted and edited through the Kubernetes API, as people do: each comes back as the plane
    applied it, a new object for a delete, the plane's spec again for an edit."""
    c = bed.config
    picked = chaos.rng.sample(serving, min(len(serving), c.out_of_band_deletes + c.out_of_band_edits))
    if not picked:
        return []
    before = _live_dgds(bed)
    where = {name: next(k for k in before if k[0] == name) for name in picked}
    deleted, edited = picked[:c.out_of_band_deletes], picked[c.out_of_band_deletes:]
    _say(c, f"deleting {len(deleted)} DGDs and editing {len(edited)} through the Kubernetes API")
    since = time.monotonic()
    checks: dict[str, Any] = {}
    for name in deleted:
        pair = where[name]
        old_uid = before[pair]["metadata"]["uid"]
        await asyncio.to_thread(_delete_by_hand, bed, pair[1], before[pair]["metadata"]["name"])
        checks[name] = lambda st, live, pair=pair, old_uid=old_uid: live.get(pair, {}).get(
            "metadata", {}).get("uid", old_uid) != old_uid
    for name in edited:
        pair = where[name]
        await asyncio.to_thread(_edit_by_hand, bed, pair[1], before[pair]["metadata"]["name"])
        checks[name] = lambda st, live, pair=pair: pair in live
    report.out_of_band["dgd deleted"] = len(deleted)
    report.out_of_band["dgd edited"] = len(edited)
    times, lost = await _time_to_heal(bed, since, checks)
    report.heal_seconds["dgd deleted/edited"] = times
    return lost


async def _edit_then_delete(bed: _Bed, chaos: _Chaos, report: ChaosReport, serving: list[str],
                            endpoints: dict[str, list[str]]) -> list[str]:
    """Overlapping faults under steady chat load (issue 34): one workload's DGD is edited by hand and
    deleted once the plane re-applies it (in the report, 2 s after the edit): when the plane's rollout of
    that cluster, a new run started after the edit, waits for readiness, as in
    tests/upgrade/test_overlapping_faults.py. Whether the delete landed during that wait is recorded. The
    endpoint's other backends must keep answering: not one client request may fail while the plane heals."""
    from contracts.ids import cluster_rollout_workflow_id
    from wingsmith.domain.dynamo.names import ANNOTATION_REVISION
    c = bed.config
    shared = [(ep, [n for n in group if n in serving]) for ep, group in sorted(endpoints.items())]
    shared = [(ep, group) for ep, group in shared if len(group) > 1]  # another backend serves meanwhile
    if not c.overlapping_faults or not shared:
        return []
    endpoint, group = shared[chaos.rng.randrange(len(shared))]
    victim = chaos.rng.choice(group)
    live = _live_dgds(bed)
    pair = next(k for k in live if k[0] == victim)
    old_uid, dgd = live[pair]["metadata"]["uid"], live[pair]["metadata"]["name"]
    revision = int((live[pair]["metadata"].get("annotations") or {}).get(ANNOTATION_REVISION) or 0)
    rollout = bed.client.get_workflow_handle(cluster_rollout_workflow_id(victim, pair[1], revision))
    before_edit = await _rollout_run(rollout)
    _say(c, f"editing {victim}'s DGD on {pair[1]} and deleting it while the plane re-applies it, under chat load "
            f"on {endpoint}")
    sent, failed, stop = [0], [], asyncio.Event()

    async def client(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            try:
                r = await http.post("/v1/chat/completions", json={
                    "model": endpoint, "messages": [{"role": "user", "content": "steady load"}]})
                if r.status_code != 200:
                    failed.append(f"{r.status_code}: {r.text[:200]}")
            except httpx.HTTPError as err:
                failed.append(repr(err))
            sent[0] += 1
    async with httpx.AsyncClient(base_url=bed.gateway_url, timeout=30, trust_env=False) as http:
        clients = [asyncio.create_task(client(http)) for _ in range(3)]
        try:
            await asyncio.sleep(1.0)
            since = time.monotonic()
            await asyncio.to_thread(_edit_by_hand, bed, pair[1], dgd)
            reapply = await _reapplying(bed, rollout, before_edit, within=30.0)
            await asyncio.to_thread(_delete_by_hand, bed, pair[1], dgd)
            report.overlap_delete_after_edit_seconds = time.monotonic() - since
            # The same run, asked after the delete: still waiting (or failed while waiting, on the delete).
            report.overlap_delete_during_reapply = reapply is not None and await _step_of(
                bed.client.get_workflow_handle(rollout.id, run_id=reapply)) == WAITING_UNTIL_READY
            _say(c, f"deleted {report.overlap_delete_after_edit_seconds:.1f} s after the edit, "
                    f"{'during' if report.overlap_delete_during_reapply else 'NOT during'} the re-apply")
            times, lost = await _time_to_heal(bed, since, {victim: lambda st, live: any(
                k[0] == victim and d["metadata"]["uid"] != old_uid for k, d in live.items())})
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            await asyncio.gather(*clients)
    report.out_of_band["dgd edited then deleted"] = 1
    report.heal_seconds["dgd edited then deleted"] = times
    report.overlap_requests = (sent[0], len(failed))
    return lost + [f"endpoint {endpoint}: {len(failed)} of {sent[0]} chat requests failed while {victim} healed "
                   f"(first: {failed[0]})"] if failed else lost


WAITING_UNTIL_READY = "waiting until ready"  # the cluster rollout's step (workflows/rollout.py) as it waits


async def _rollout_run(handle: Any) -> str | None:
    """The newest run of a cluster rollout workflow, None when there is none or it cannot be told."""
    try:
        return (await handle.describe()).run_id
    except Exception:  # noqa: BLE001 - not started yet, or the server is busy: no run to compare
        return None


async def _step_of(handle: Any) -> str | None:
    """Where a cluster rollout is (its progress query); None when it does not answer (e.g. the worker was
    just killed)."""
    from contracts import rollout as rollout_contract
    try:
        return await asyncio.wait_for(handle.query(rollout_contract.QUERY_PROGRESS), timeout=5)
    except Exception:  # noqa: BLE001 - no answer is an answer here
        return None


async def _reapplying(bed: _Bed, handle: Any, before: str | None, within: float) -> str | None:
    """The run id of the plane's re-apply once it waits for readiness: a run newer than `before`, still
    running, whose step is "waiting until ready". None if none did within `within` seconds."""
    from temporalio.client import WorkflowExecutionStatus
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            desc = await handle.describe()
        except Exception:  # noqa: BLE001 - not there yet
            desc = None
        if desc is not None and desc.run_id != before and desc.status == WorkflowExecutionStatus.RUNNING:
            run = bed.client.get_workflow_handle(handle.id, run_id=desc.run_id)
            if await _step_of(run) == WAITING_UNTIL_READY:
                return desc.run_id
        await asyncio.sleep(0.05)
    return None


async def _partition(bed: _Bed, report: ChaosReport, serving: list[str]) -> list[str]:
    """One cluster unreachable for a while (API and frontends): its workloads show degraded, and serve
    again when it answers (or elsewhere, if it stayed away longer than the grace)."""
    c = bed.config
    cluster = c.unreachable_cluster
    if not cluster or not c.unreachable_seconds:
        return []
    affected = [name for (name, where) in _live_dgds(bed) if where == cluster and name in serving]
    _say(c, f"making {cluster} unreachable for {c.unreachable_seconds:.0f}s ({len(affected)} workloads there)")
    since = time.monotonic()
    bed.sims.faults(cluster).update({"unreachable": True})
    seen_degraded: set[str] = set()
    try:
        while time.monotonic() - since < c.unreachable_seconds:
            # All at once, so that one slow answer (a worker just killed) does not leave the others
            # unasked for seconds: each is asked again within seconds throughout the partition.
            for name, status in zip(affected, await asyncio.gather(*(_status(bed, n) for n in affected)),
                                    strict=True):
                if status is not None and status.stage == "degraded":
                    seen_degraded.add(name)
            await asyncio.sleep(0.5)
    finally:
        bed.sims.faults(cluster).update({"unreachable": False})
    report.out_of_band[f"{cluster} unreachable {c.unreachable_seconds:.0f}s"] = len(affected)
    lost = [f"workload {n}: showed serving while {cluster} was unreachable" for n in affected
            if n not in seen_degraded]
    times, not_healed = await _time_to_heal(bed, since, {n: lambda st, live: True for n in affected})
    report.heal_seconds["cluster unreachable (from the start)"] = times
    return lost + not_healed


async def _restart_plane(bed: _Bed, chaos: _Chaos, report: ChaosReport, names: list[str]) -> list[str]:
    """SIGTERM every process of the plane, as stopping `up` does, and start it again on the same home
    and ports: every DGD must still be there (the same object) and every workload serve on."""
    from sim.kube import SimulatedClusters, default_cluster_specs
    from wingsmith.local.temporal_server import stop_process
    c = bed.config
    if not c.plane_restart:
        return []
    before = {pair: d["metadata"]["uid"] for pair, d in _live_dgds(bed).items()}
    _say(c, "stopping the whole plane (worker, gateway, clusters, Temporal, Postgres)")
    async with chaos.worker_lock:
        since = time.monotonic()
        await asyncio.to_thread(bed.worker.stop)
        await asyncio.to_thread(stop_process, bed.gateway, 10)
        bed.faults_before_restart.update(_fault_counts(bed))
        port = bed.sims.port
        await asyncio.to_thread(bed.sims.stop)
        await asyncio.to_thread(bed.temporal_server.stop)
        await asyncio.to_thread(bed.pg.stop)
        _say(c, "starting it again on the same home")
        await asyncio.to_thread(bed.pg.start)
        await asyncio.to_thread(bed.temporal_server.start)
        bed.sims = await asyncio.to_thread(lambda: SimulatedClusters(
            default_cluster_specs(), home=bed.root / "sim", operator_delay=c.operator_delay, port=port).start())
        chaos.set_cluster_faults(True)
        await asyncio.to_thread(_start_gateway, bed)
        bed.worker.start()
    report.out_of_band["plane restarts"] = 1
    times, lost = await _time_to_heal(bed, since, {n: lambda st, live: True for n in names})
    report.heal_seconds["plane restart (to serving)"] = times
    after = {pair: d["metadata"]["uid"] for pair, d in _live_dgds(bed).items()}
    lost += [f"workload {w} on {cl}: its DGD did not survive the plane restart" for (w, cl), uid in sorted(
        before.items()) if after.get((w, cl)) != uid]
    return lost

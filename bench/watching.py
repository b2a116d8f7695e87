"""What watching costs: worker CPU and Temporal history events per watched workload per hour.

Runs the real pieces on this machine: a Temporal dev server, PostgreSQL, the three simulated
clusters and the worker, each as its own process (so each CPU figure is its own). N workloads
are put on the clusters as serving (their DGDs applied through the real client, their workflows
started with that state, so they go straight to watching), then left alone but for a few faults: after a warm-up, the
worker's and the dev server's CPU time (/proc), every workflow's history length and the server's
requests by operation (its Prometheus metrics) are read at the start and the end of a measuring
window, and scaled to an hour. During the window a sample of workloads get a fault, as a person
makes one (their DGD deleted, or its spec edited through the Kubernetes API), at times spread over
the window; the time from each fault until its workflow saw it (its `ClusterDegraded` event) is
held against the status period. Faulted workloads are left out of the history figures.

Two runs, side by side, each on fresh servers:
- baseline: every look answers the workflow after each status period (report = status period),
  which is how watching worked before looks waited for news: one activity and one workflow task
  per cluster per period, news or not;
- news: the shipped defaults, where a look reads every status period and answers only when what it
  sees changed, or after the report period.

    .venv/bin/python bench/watching.py [--workloads 50] [--minutes 3] [--faults 10] [--only baseline|news]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.service import RPCError  # noqa: E402

from contracts import conditions as reason  # noqa: E402
from contracts.workload import ClusterState, WatchSettings, WorkloadState, WorkloadStatus, WorkloadWorkflowInput
from sim.kube import ClusterSpec as SimClusterSpec  # noqa: E402
from sim.kube import NodePool, SimulatedClusters, default_cluster_specs  # noqa: E402
from wingsmith.adapters.kube import DgdClient, KubeconfigRef, KubeError, new_api_client  # noqa: E402
from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster  # noqa: E402
from wingsmith.adapters.store.db import migrate, open_pool  # noqa: E402
from wingsmith.adapters.temporal import connect  # noqa: E402
from wingsmith.domain.config import Settings  # noqa: E402
from wingsmith.domain.dynamo import GROUP, PLURAL, VERSION, WorkerPool, render_dgd  # noqa: E402
from wingsmith.domain.dynamo.render import SPEC_HASH_ANNOTATION  # noqa: E402
from wingsmith.domain.placement.models import PlacementPlan  # noqa: E402
from wingsmith.domain.workloads import WorkloadPlan  # noqa: E402
from wingsmith.local import temporal_server  # noqa: E402
from wingsmith.local.ports import free_port
from wingsmith.local.postgres import LocalPostgres  # noqa: E402
from wingsmith.local.temporal_server import TemporalDevServer, stop_process  # noqa: E402

T = TypeVar("T")
SHA = "b" * 40
IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0"
CLUSTERS = ("sim-east", "sim-west")  # H200, one GPU per workload


def _plan(workload_id: str) -> WorkloadPlan:
    return WorkloadPlan(
        workload_id=workload_id, artifact_id=f"openai/gpt-oss-20b@{SHA}", artifact_sha=SHA, draft_version=1,
        hf_model_id="openai/gpt-oss-20b", hf_revision=SHA, served_model_name=workload_id, engine="vllm",
        hardware="h200", layout="single_node_tp", variant="default", features=[], replicas=1, gpus_per_replica=1,
        worker=WorkerPool(args=["--tensor-parallel-size", "1"], gpus_per_node=1), image=IMAGE,
        namespace="default", placement=PlacementPlan(hardware="h200", gpus_per_node=1, replicas=1), fit={})


class SimsProcess:
    """The simulated clusters in a process of their own (`--serve-sims`): in the bench's process they
    shared its interpreter lock with the placing and the queries, and at 5,000 workloads their frontends
    answered probes too late (ReadTimeout), which the plane rightly took for degraded frontends."""

    def __init__(self, home: Path, workloads: int):
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve-sims", str(home), str(workloads)],
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(10)
            raise RuntimeError("the simulated clusters did not start")
        described = json.loads(line)
        self.kubeconfig_path = Path(described["kubeconfig"])
        self._clusters: dict[str, dict[str, str]] = described["clusters"]

    @property
    def names(self) -> list[str]:
        return list(self._clusters)

    def region(self, name: str) -> str:
        return self._clusters[name]["region"]

    def frontend_url(self, cluster: str, namespace: str, name: str) -> str:
        return f"{self._clusters[cluster]['frontend_base_url']}/{namespace}/{name}"

    def api_client(self, name: str) -> Any:
        from kubernetes import config
        return config.new_client_from_config(config_file=str(self.kubeconfig_path), context=name)

    def stop(self) -> None:
        stop_process(self.proc, 15)


def _serve_sims(home: Path, workloads: int) -> None:
    """The `--serve-sims` child: serve until SIGTERM."""
    import threading
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # The operator passes over every deployment while anything changes (a fault, a heal): every 0.05 s,
    # 5,000 deployments' passes left its frontends too little of the process, and they timed probes out.
    with SimulatedClusters(_cluster_specs(workloads), home=home, operator_delay=0.0, persist=False,
                           tick=0.5) as sims:
        print(json.dumps(json.loads((sims.home / "clusters.json").read_text())), flush=True)
        stop.wait()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _with_metrics_port(port: int) -> None:
    """The dev server's Prometheus metrics on a known port (it picks a random one otherwise): its requests
    by operation say what its CPU goes to."""
    plain = temporal_server.dev_server_command

    def command(**kwargs: Any) -> list[str]:
        return [*plain(**kwargs), "--metrics-port", str(port)]
    temporal_server.dev_server_command = command


_SERVED = re.compile(r'^service_requests\{(?P<labels>[^}]*)\} (?P<n>\S+)$')


async def _server_requests(metrics_url: str) -> Counter[str]:
    """Requests the dev server's frontend took, by operation (each worker poll, heartbeat, completion...)."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(metrics_url, timeout=30)).text
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        m = _SERVED.match(line)
        if m and 'service_name="frontend"' in m["labels"]:
            op = re.search(r'operation="([^"]+)"', m["labels"])
            if op:
                counts[op[1]] += int(float(m["n"]))
    return counts


_SDK = re.compile(r'^(?P<name>temporal_(?:sticky_cache_miss|sticky_cache_total_forced_eviction|'
                  r'workflow_task_replay_latency_seconds_count|workflow_task_execution_latency_seconds_count|'
                  r'activity_execution_latency_seconds_count)\w*)(?:\{[^}]*\})? (?P<n>\S+)$')


async def _worker_counts(sdk_url: str) -> Counter[str]:
    """The worker's SDK counters that say where its workflow CPU goes: workflow tasks, and how many of them
    replayed a whole history (a workflow evicted from the sticky cache, or its sticky task taken too late)."""
    counts: Counter[str] = Counter()
    try:
        async with httpx.AsyncClient() as http:
            text = (await http.get(sdk_url, timeout=30)).text
    except httpx.HTTPError:
        return counts
    for line in text.splitlines():
        m = _SDK.match(line)
        if m:
            counts[m["name"].removeprefix("temporal_").removesuffix("_total")] += int(float(m["n"]))
    return counts


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--warmup-seconds", type=float, default=40.0)
    parser.add_argument("--status-seconds", type=float, default=10.0)
    parser.add_argument("--probe-seconds", type=float, default=30.0)
    parser.add_argument("--report-seconds", type=float, default=WatchSettings().report_seconds,
                        help="the news run's report period")
    parser.add_argument("--faults", type=int, default=10, help="workloads given a fault in each measuring window")
    parser.add_argument("--only", choices=("baseline", "news"), help="measure one run instead of both")
    args = parser.parse_args()
    # SIGTERM (a timeout, a kill) unwinds like Ctrl-C, so the servers started below are stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    runs = {"baseline": args.status_seconds, "news": args.report_seconds}
    figures = {}
    for name, report_seconds in runs.items():
        if args.only in (None, name):
            watch = WatchSettings(status_seconds=args.status_seconds, probe_seconds=args.probe_seconds,
                                  report_seconds=report_seconds)
            print(f"--- {name}: status every {watch.status_seconds:g} s, frontend every {watch.probe_seconds:g} s, "
                  f"a look with no news answers after {watch.report_seconds:g} s", flush=True)
            figures[name] = await _measure(args, watch)
            _print_figures(args, {name: figures[name]})  # at once: a later run that fails loses nothing
    print(f"\n{args.workloads} watched workloads, each run measured {args.minutes:g} min or one report period:")
    _print_figures(args, figures)
    if len(figures) == 2:
        base, news = figures["baseline"], figures["news"]
        print(f"  news/baseline: worker CPU x{news['cpu_per_hour'] / base['cpu_per_hour']:.2f}, "
              f"history events x{news['events_per_hour'] / base['events_per_hour']:.3f}")


def _print_figures(args: argparse.Namespace, figures: dict[str, dict[str, Any]]) -> None:
    print(f"  {'':<10} {'worker % core':>14} {'CPU-s/wl-hour':>14} {'events/wl-hour':>15} "
          f"{'dev server % core':>18} {'sim % core':>11} {'worker RSS MB':>14}")
    for name, f in figures.items():
        print(f"  {name:<10} {f['worker_pct']:>14.1f} {f['cpu_per_hour']:>14.2f} {f['events_per_hour']:>15.0f} "
              f"{f['server_pct']:>18.1f} {f['sim_pct']:>11.1f} {f['worker_rss_mb']:>14.0f}")
    print("  (sim: the simulated clusters, in their own process; near 100 % they, not the plane, are the limit)")
    for name, f in figures.items():
        ops = sorted(f["server_ops"].items(), key=lambda kv: -kv[1])
        total = sum(n for _, n in ops) or 1
        print(f"  {name}: dev server requests per workload-hour {total:,.0f}: " + ", ".join(
            f"{op} {n:,.0f} ({100 * n / total:.0f} %)" for op, n in ops[:6]))
        seen = f["fault_seconds"]
        if f.get("worker_counts"):
            print(f"  {name}: worker per workload-hour: " + ", ".join(
                f"{k} {n:,.1f}" for k, n in sorted(f["worker_counts"].items())))
        print(f"  {name}: faults seen {len(seen)} of {f['faults']:.0f}, "
              f"{sum(s <= args.status_seconds for s in seen)} within one status period ({args.status_seconds:g} s)"
              + (f"; fault to seen: median {sorted(seen)[len(seen) // 2]:.1f} s, max {max(seen):.1f} s"
                 if seen else ""), flush=True)


async def _measure(args: argparse.Namespace, watch: WatchSettings) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="wingsmith-watch-bench-"))
    os.environ["WINGSMITH_KUBECONFIG_DIR"] = str(root)  # the sims' kubeconfig is in it, for every part
    pg = LocalPostgres(root / "pg", free_port(), durable=False).start()
    metrics_port = free_port()
    _with_metrics_port(metrics_port)
    temporal = TemporalDevServer(port=free_port(), ui_port=None, db_file=None, log_file=root / "temporal.log").start()
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    sims = worker = None
    try:
        sims = SimsProcess(root / "sim", args.workloads)
        pool = await open_pool(pg.dsn())
        await migrate(pool)
        # The workloads' artifact, as approval leaves it: a workload whose stage changes writes its
        # registry row, which must name a known artifact (else that write is retried for ever).
        await pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                           "values ($1, $2, $3, $3, 'approved', $4, 'bench')", _plan("x").artifact_id,
                           _plan("x").hf_model_id, SHA, f"artifact/{_plan('x').artifact_id}")
        for name in sims.names:
            await create_cluster(pool, ClusterSpec(name=name, region=sims.region(name),
                                                   kubeconfig=str(sims.kubeconfig_path), kube_context=name))
        settings = Settings(home=root / "home", task_queue="watch-bench", kube_task_queue="watch-bench-kube",
                            log_level="WARNING", log_format="json")
        client = await connect(settings, address=temporal.address)
        env = dict(os.environ, DATABASE_URL=pg.dsn(), TEMPORAL_ADDRESS=temporal.address,
                   WINGSMITH_HOME=str(root / "worker"), WINGSMITH_TASK_QUEUE=settings.task_queue,
                   WINGSMITH_KUBE_TASK_QUEUE=settings.kube_task_queue, WINGSMITH_LOG_LEVEL="WARNING",
                   WINGSMITH_LOG_FORMAT="json", WINGSMITH_WORKER_METRICS_PORT=str(free_port()),
                   WINGSMITH_WORKER_SDK_METRICS_PORT=str(sdk_port := free_port()))
        sdk_url = f"http://127.0.0.1:{sdk_port}/metrics"
        worker = _start_worker(env, root / "worker.log")
        placed = await _place(client, settings, sims, watch, args.workloads)
        ids = list(placed)
        print(f"{len(ids)} workloads serving on {', '.join(CLUSTERS)}; warming up {args.warmup_seconds:.0f} s",
              flush=True)
        await asyncio.sleep(args.warmup_seconds)
        server_pid = temporal.process.pid if temporal.process else 0
        # At least one report period, so every quiet look's answer falls in the window once.
        window = max(args.minutes * 60, watch.report_seconds)
        faulted = random.Random(38).sample(ids, min(args.faults, len(ids)))
        quiet = [wid for wid in ids if wid not in faulted]
        # The simulated clusters' CPU says whether the stand-in kept up.
        sim0 = _cpu_seconds(sims.proc.pid)
        cpu0, server0, events0, ops0, sdk0, t0 = (
            _cpu_seconds(worker.pid), _cpu_seconds(server_pid), await _events(client, quiet),
            await _server_requests(metrics_url), await _worker_counts(sdk_url), time.monotonic())
        faults = asyncio.create_task(_inject_faults(sims, {wid: placed[wid] for wid in faulted}, window))
        await asyncio.sleep(window)
        sim_cpu = _cpu_seconds(sims.proc.pid) - sim0
        # The bench's own calls (describes, queries) after the figures are read, so they are not counted.
        cpu1, server1, ops1, sdk1, t1 = (_cpu_seconds(worker.pid), _cpu_seconds(server_pid),
                                         await _server_requests(metrics_url), await _worker_counts(sdk_url),
                                         time.monotonic())
        events1 = await _events(client, quiet)
        rss = _rss_mb(worker.pid)
        injected = await faults
        hours, seconds = (t1 - t0) / 3600, t1 - t0
        stages = await _stages(client, quiet)
        print(f"measured {seconds:.0f} s with {len(ids)} watched workloads ({stages})", flush=True)
        fault_seconds = await _fault_seen(client, injected)
        await pool.close()
        return {"worker_pct": 100 * (cpu1 - cpu0) / seconds, "cpu_per_hour": (cpu1 - cpu0) / hours / len(ids),
                "events_per_hour": (events1 - events0) / hours / len(quiet),
                "server_pct": 100 * (server1 - server0) / seconds, "sim_pct": 100 * sim_cpu / seconds,
                "worker_rss_mb": rss, "faults": len(injected), "fault_seconds": fault_seconds,
                "server_ops": {op: (ops1[op] - ops0[op]) / hours / len(ids) for op in ops1 if ops1[op] > ops0[op]},
                "worker_counts": {k: (sdk1[k] - sdk0[k]) / hours / len(ids) for k in sdk1}}
    finally:
        stop_process(worker, 15)
        if sims is not None:
            sims.stop()
        temporal.stop()
        pg.stop()


async def _inject_faults(sims: SimsProcess, workloads: dict[str, tuple[str, str]],
                         window: float) -> dict[str, datetime]:
    """Faults a person makes, spread over the window (the last well before its end, so it is seen within
    it): every other faulted workload's DGD deleted, the rest edited. Returns when each was made."""
    made: dict[str, datetime] = {}
    apis = {c: sims.api_client(c) for c in CLUSTERS}
    try:
        for i, (wid, (cluster, name)) in enumerate(workloads.items()):
            await asyncio.sleep(0.8 * window / max(1, len(workloads)))
            made[wid] = datetime.now(UTC)  # before the call: the time counted is never short
            await asyncio.to_thread(_delete if i % 2 == 0 else _edit, apis[cluster], name)
    finally:
        for api in apis.values():
            api.close()
    return made


def _delete(api: Any, name: str) -> None:
    from kubernetes.client import CustomObjectsApi
    CustomObjectsApi(api).delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)


def _edit(api: Any, name: str) -> None:
    """The worker pointed at another image, as a hurried hand-fix would."""
    from kubernetes.client import CustomObjectsApi
    custom = CustomObjectsApi(api)
    live = cast(dict[str, Any], custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name))
    components = live["spec"]["components"]
    for component in components:
        for container in component.get("podTemplate", {}).get("spec", {}).get("containers", []):
            if component.get("type") != "frontend" and container.get("name") == "main":
                container["image"] = IMAGE + "-hand-edited"
    custom.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name, {
        "metadata": {"resourceVersion": live["metadata"]["resourceVersion"]}, "spec": {"components": components}})


async def _fault_seen(client, made: dict[str, datetime]) -> list[float]:
    """Seconds from each fault until its workflow saw it (its first ClusterDegraded event after it)."""
    from workflows.workload import WorkloadWorkflow

    async def seen(wid: str) -> float | None:
        handle = client.get_workflow_handle_for(WorkloadWorkflow.run, wid)
        for attempt in range(5):  # a query is a workflow task: a saturated worker may not answer in time
            try:
                status = await handle.query(WorkloadWorkflow.status, rpc_timeout=timedelta(seconds=30))
                break
            except RPCError:
                if attempt == 4:
                    return None
        times = [e.time for e in status.timeline if e.reason == reason.CLUSTER_DEGRADED_EVENT and e.time >= made[wid]]
        return (min(times) - made[wid]).total_seconds() if times else None

    found = await _each(list(made), seen)
    for wid, s in zip(made, found, strict=True):
        if s is None:
            print(f"  fault on {wid} not seen by its workflow", flush=True)
    return [s for s in found if s is not None]


def _cluster_specs(workloads: int) -> list[SimClusterSpec]:
    """The default clusters, the H200 ones given nodes enough for every watched workload (one GPU each):
    a DGD whose pods find no GPU would be unready, and the bench would watch degraded workloads."""
    per_cluster = -(-workloads // len(CLUSTERS))
    specs = []
    for spec in default_cluster_specs():
        if spec.name in CLUSTERS:
            [pool] = spec.node_pools
            nodes = max(pool.count, -(-per_cluster // pool.gpus_per_node))
            spec = spec.model_copy(update={"node_pools": [NodePool.of("h200", nodes)]})
        specs.append(spec)
    return specs


def _start_worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "worker"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


async def _place(client, settings: Settings, sims: SimsProcess, watch: WatchSettings,
                 workloads: int) -> dict[str, tuple[str, str]]:
    """Workflow id → (cluster, DGD name) of each workload placed."""
    from contracts.ids import workload_workflow_id
    from contracts.workload import start_search_attributes
    from workflows.workload import WorkloadWorkflow

    kubes = {c: DgdClient(new_api_client(KubeconfigRef(source=str(sims.kubeconfig_path), context=c))) for c in CLUSTERS}
    # A few at once: thousands one after the other took a quarter of an hour on a busy machine, and many at
    # once starve the simulated clusters (this process) until their answers time out.
    limit = asyncio.Semaphore(4)

    async def apply(cluster: str, manifest: dict[str, Any]) -> Any:
        for attempt in range(10):
            try:
                return await asyncio.to_thread(kubes[cluster].apply, manifest)
            except KubeError:
                if attempt == 9:
                    raise
                await asyncio.sleep(2)

    async def one(i: int) -> tuple[str, tuple[str, str]]:
        workload_id, cluster = f"watched-{i:04d}", CLUSTERS[i % len(CLUSTERS)]
        plan = _plan(workload_id)
        manifest = render_dgd(plan.rollout_spec(cluster, 1))
        async with limit:
            applied = await apply(cluster, manifest)
            state = WorkloadState(stage="serving", clusters={cluster: ClusterState(
                cluster=cluster, replicas=1, state="serving", dgd_name=applied.name,
                frontend_url=sims.frontend_url(cluster, "default", applied.name),
                generation=applied.generation, spec_hash=manifest["metadata"]["annotations"][SPEC_HASH_ANNOTATION])})
            params = WorkloadWorkflowInput(plan=plan, requested_by="bench", kube_task_queue=settings.kube_task_queue,
                                           watch=watch, resume=state)
            await client.start_workflow(WorkloadWorkflow.run, params, id=workload_workflow_id(workload_id),
                                        task_queue=settings.task_queue,
                                        search_attributes=start_search_attributes(params))
        return workload_workflow_id(workload_id), (cluster, applied.name)
    try:
        return dict(await asyncio.gather(*(one(i) for i in range(workloads))))
    finally:
        for kube in kubes.values():
            kube.close()


async def _each(ids: list[str], call: Callable[[str], Awaitable[T]]) -> list[T]:
    """`call` for every workflow, 50 at a time: 1,000 one after the other take minutes on a busy server."""
    limit = asyncio.Semaphore(50)

    async def one(wid: str) -> T:
        async with limit:
            return await call(wid)
    return await asyncio.gather(*(one(wid) for wid in ids))


async def _events(client, ids: list[str]) -> int:
    """History events of every current run (no run continues as new within a window of minutes:
    that takes `looks_per_run` answered looks, an hour even when every look answers each period)."""
    async def length(wid: str) -> int:
        return (await client.get_workflow_handle(wid).describe()).history_length
    return sum(await _each(ids, length))


async def _stages(client, ids: list[str]) -> str:
    from workflows.workload import WorkloadWorkflow
    stages: Counter[str] = Counter()
    examples: dict[str, tuple[str, list[str]]] = {}
    async def status(wid: str) -> WorkloadStatus | None:
        handle = client.get_workflow_handle_for(WorkloadWorkflow.run, wid)
        try:
            return await handle.query(WorkloadWorkflow.status, rpc_timeout=timedelta(seconds=10))
        except RPCError:  # a query is a workflow task: a saturated worker does not answer it in time
            return None

    for wid, seen in zip(ids, await _each(ids, status), strict=True):
        if seen is None:
            stages["not answering a query within 10 s"] += 1
            continue
        stages[seen.stage] += 1
        examples.setdefault(seen.stage, (wid, seen.events[-6:]))
    # A figure over workloads that did not stay serving is not watching's cost: say why they did not.
    for stage, (wid, events) in sorted(examples.items()):
        if stage != "serving":
            print(f"  not serving, e.g. {wid} ({stage}):", *(f"    {e}" for e in events), sep="\n")
    return ", ".join(f"{n} {s}" for s, n in sorted(stages.items()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-sims"]:
        _serve_sims(Path(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # see PITFALLS: the Temporal client can abort at interpreter exit

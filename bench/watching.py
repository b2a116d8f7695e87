"""What watching costs: worker CPU and Temporal history events per watched workload per hour.

Runs the real pieces on this machine: a Temporal dev server, PostgreSQL, the three simulated
clusters (in this process) and the worker as its own process (so its CPU is its own). N workloads
are put on the clusters as serving (their DGDs applied through the real client, their workflows
started with that state, so they go straight to watching), then left alone: after a warm-up, the
worker's CPU time (/proc) and every workflow's history length are read at the start and the end of
a measuring window, and scaled to an hour.

    .venv/bin/python bench/watching.py [--workloads 50] [--minutes 3] [--status-seconds 10] [--probe-seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.kube import ClusterSpec as SimClusterSpec  # noqa: E402
from sim.kube import NodePool, SimulatedClusters, default_cluster_specs  # noqa: E402
from wingsmith.config import Settings  # noqa: E402
from wingsmith.dynamo import WorkerPool, render_dgd  # noqa: E402
from wingsmith.dynamo.render import SPEC_HASH_ANNOTATION  # noqa: E402
from wingsmith.kube import DgdClient, KubeconfigRef, new_api_client  # noqa: E402
from wingsmith.local.postgres import LocalPostgres, free_port  # noqa: E402
from wingsmith.local.temporal_server import TemporalDevServer, stop_process  # noqa: E402
from wingsmith.placement.models import PlacementPlan  # noqa: E402
from wingsmith.store.clusters import ClusterSpec, create_cluster  # noqa: E402
from wingsmith.store.db import migrate, open_pool  # noqa: E402
from wingsmith.temporal import connect  # noqa: E402
from wingsmith.workload_state import ClusterState, WatchSettings, WorkloadState, WorkloadWorkflowInput  # noqa: E402
from wingsmith.workloads import WorkloadPlan  # noqa: E402

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


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--warmup-seconds", type=float, default=40.0)
    parser.add_argument("--status-seconds", type=float, default=10.0)
    parser.add_argument("--probe-seconds", type=float, default=30.0)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="wingsmith-watch-bench-"))
    pg = LocalPostgres(root / "pg", free_port(), durable=False).start()
    temporal = TemporalDevServer(port=free_port(), ui_port=None, db_file=None, log_file=root / "temporal.log").start()
    sims = SimulatedClusters(_cluster_specs(args.workloads), home=root / "sim", operator_delay=0.0,
                             persist=False).start()
    worker = None
    try:
        pool = await open_pool(pg.dsn())
        await migrate(pool)
        # The workloads' artifact, as approval leaves it: a workload whose stage changes writes its
        # registry row, which must name a known artifact (else that write is retried for ever).
        await pool.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                           "values ($1, $2, $3, $3, 'approved', $4, 'bench')", _plan("x").artifact_id,
                           _plan("x").hf_model_id, SHA, f"artifact/{_plan('x').artifact_id}")
        for name in sims.names:
            await create_cluster(pool, ClusterSpec(name=name, region=sims.cluster(name).spec.region,
                                                   kubeconfig=str(sims.kubeconfig_path), kube_context=name))
        settings = Settings(home=root / "home", task_queue="watch-bench", kube_task_queue="watch-bench-kube",
                            log_level="WARNING", log_format="json")
        client = await connect(settings, address=temporal.address)
        env = dict(os.environ, DATABASE_URL=pg.dsn(), TEMPORAL_ADDRESS=temporal.address,
                   WINGSMITH_HOME=str(root / "worker"), WINGSMITH_TASK_QUEUE=settings.task_queue,
                   WINGSMITH_KUBE_TASK_QUEUE=settings.kube_task_queue, WINGSMITH_LOG_LEVEL="WARNING",
                   WINGSMITH_LOG_FORMAT="json")
        worker = _start_worker(env, root / "worker.log")
        ids = await _place(client, settings, sims, args)
        print(f"{len(ids)} workloads serving on {', '.join(CLUSTERS)}; status every {args.status_seconds:g} s, "
              f"frontend every {args.probe_seconds:g} s; warming up {args.warmup_seconds:.0f} s", flush=True)
        await asyncio.sleep(args.warmup_seconds)
        server_pid = temporal.process.pid if temporal.process else 0
        # The simulated clusters run in this process: their CPU says whether the stand-in kept up.
        sim0 = time.process_time()
        cpu0, server0, events0, t0 = (_cpu_seconds(worker.pid), _cpu_seconds(server_pid),
                                      await _events(client, ids), time.monotonic())
        await asyncio.sleep(args.minutes * 60)
        sim_cpu = time.process_time() - sim0
        cpu1, server1, events1, t1 = (_cpu_seconds(worker.pid), _cpu_seconds(server_pid),
                                      await _events(client, ids), time.monotonic())
        hours = (t1 - t0) / 3600
        stages = await _stages(client, ids)
        per_hour_cpu = (cpu1 - cpu0) / hours / len(ids)
        per_hour_events = (events1 - events0) / hours / len(ids)
        print(f"measured {t1 - t0:.0f} s with {len(ids)} watched workloads ({stages})")
        print(f"  worker CPU            {cpu1 - cpu0:.1f} s = {100 * (cpu1 - cpu0) / (t1 - t0):.1f} % of one core; "
              f"{per_hour_cpu:.2f} CPU-s per workload-hour")
        print(f"  simulated clusters    {sim_cpu:.1f} s CPU = {100 * sim_cpu / (t1 - t0):.1f} % of one core "
              "(this process; over ~90 % they, not the plane, are the limit)")
        print(f"  Temporal dev server   {server1 - server0:.1f} s CPU = "
              f"{100 * (server1 - server0) / (t1 - t0):.1f} % of one core")
        print(f"  history               {per_hour_events:.0f} events per workload-hour "
              f"({(events1 - events0) / len(ids):.0f} each in the window)")
        for n in (1_000, 5_000):
            print(f"  extrapolated, {n:>5,} workloads: worker {per_hour_cpu * n / 3600:.2f} cores, "
                  f"{per_hour_events * n / 3600:.0f} history events/s (linear; not measured)")
        await pool.close()
    finally:
        stop_process(worker, 15)
        sims.stop()
        temporal.stop()
        pg.stop()


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


async def _place(client, settings: Settings, sims: SimulatedClusters, args: argparse.Namespace) -> list[str]:
    from workflows.ids import workload_workflow_id
    from workflows.workload import WorkloadWorkflow, start_search_attributes

    watch = WatchSettings(status_seconds=args.status_seconds, probe_seconds=args.probe_seconds)
    ids = []
    kubes = {c: DgdClient(new_api_client(KubeconfigRef(path=str(sims.kubeconfig_path), context=c))) for c in CLUSTERS}
    for i in range(args.workloads):
        workload_id, cluster = f"watched-{i:04d}", CLUSTERS[i % len(CLUSTERS)]
        plan = _plan(workload_id)
        manifest = render_dgd(plan.rollout_spec(cluster, 1))
        applied = await asyncio.to_thread(kubes[cluster].apply, manifest)
        state = WorkloadState(stage="serving", clusters={cluster: ClusterState(
            cluster=cluster, replicas=1, state="serving", dgd_name=applied.name,
            frontend_url=sims.cluster(cluster).frontend_url("default", applied.name), generation=applied.generation,
            spec_hash=manifest["metadata"]["annotations"][SPEC_HASH_ANNOTATION])})
        params = WorkloadWorkflowInput(plan=plan, requested_by="bench", kube_task_queue=settings.kube_task_queue,
                                       watch=watch, resume=state)
        await client.start_workflow(WorkloadWorkflow.run, params, id=workload_workflow_id(workload_id),
                                    task_queue=settings.task_queue, search_attributes=start_search_attributes(params))
        ids.append(workload_workflow_id(workload_id))
    for kube in kubes.values():
        kube.close()
    return ids


async def _events(client, ids: list[str]) -> int:
    """History events of every current run (no run continues as new within a window of minutes:
    that takes `looks_per_run` looks, an hour at the default period)."""
    total = 0
    for wid in ids:
        total += (await client.get_workflow_handle(wid).describe()).history_length
    return total


async def _stages(client, ids: list[str]) -> str:
    from collections import Counter

    from workflows.workload import WorkloadWorkflow
    stages: Counter[str] = Counter()
    examples: dict[str, tuple[str, list[str]]] = {}
    for wid in ids:
        handle = client.get_workflow_handle_for(WorkloadWorkflow.run, wid)
        status = await handle.query(WorkloadWorkflow.status)
        stages[status.stage] += 1
        examples.setdefault(status.stage, (wid, status.events[-6:]))
    # A figure over workloads that did not stay serving is not watching's cost: say why they did not.
    for stage, (wid, events) in sorted(examples.items()):
        if stage != "serving":
            print(f"  not serving, e.g. {wid} ({stage}):", *(f"    {e}" for e in events), sep="\n")
    return ", ".join(f"{n} {s}" for s, n in sorted(stages.items()))


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # see PITFALLS: the Temporal client can abort at interpreter exit

"""The plane's own share of the time from approval to serving.

Runs the real pieces on this machine: a Temporal dev server, PostgreSQL, the offline Hub, the
three simulated clusters with the operator's delays set to zero, and the worker in-process. An
approved gpt-oss-120b artifact is then deployed as 1 and as 10 concurrent workloads (one H200
each), timing workflow start → every cluster serving. With the simulated operator answering at
once, what remains is the plane: Temporal round trips, activities, Kubernetes API calls, probes.

    .venv/bin/python bench/workloads.py
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.client import WorkflowHandle

from sim.hub import start_hub_server
from sim.kube import SimulatedClusters, default_cluster_specs
from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster
from wingsmith.adapters.store.db import migrate, open_pool
from wingsmith.adapters.temporal import connect
from wingsmith.domain.config import Settings
from wingsmith.local.ports import free_port
from wingsmith.local.postgres import LocalPostgres
from wingsmith.local.temporal_server import TemporalDevServer

MODEL, SHA_OF = "openai/gpt-oss-120b", None


def _snapshot_sha(model: str) -> str:
    """The commit the offline Hub serves for this model (read once, before any timing)."""
    return json.loads(Path("sim/hub/snapshot.json").read_text())["models"][model]["sha"]


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="wingsmith-bench-"))
    os.environ["WINGSMITH_KUBECONFIG_DIR"] = str(root)  # the sims' kubeconfig is in it
    pg = LocalPostgres(root / "pg", free_port(), durable=False).start()
    temporal = TemporalDevServer(port=free_port(), ui_port=None, db_file=None, log_file=root / "t.log").start()
    hub = start_hub_server()
    sims = SimulatedClusters(default_cluster_specs(), home=root / "sim", operator_delay=0.0).start()
    try:
        await run(root, pg, temporal, hub, sims)
    finally:
        sims.stop()
        hub.stop()
        temporal.stop()
        pg.stop()


async def run(root, pg, temporal, hub, sims) -> None:
    from wingsmith.adapters.recipes.files import load_catalog
    from wingsmith.adapters.starter import artifact_handle, create_workload, register_artifact
    from wingsmith.adapters.store.workloads import approved_artifact
    from wingsmith.domain.review import ReviewRequest
    from wingsmith.domain.workloads import WorkloadRequest, approved_artifact_from_row, plan_workload
    from worker.main import running_in_process
    from worker.registry import WorkerDeps
    from workflows.artifact import ArtifactWorkflow
    from workflows.workload import WorkloadWorkflow

    pool = await open_pool(pg.dsn())
    await migrate(pool)
    for name in sims.names:
        await create_cluster(pool, ClusterSpec(name=name, region=sims.cluster(name).spec.region,
                                               kubeconfig=str(sims.kubeconfig_path), kube_context=name))
    settings = Settings(home=root / "home", hf_endpoint=hub.url, task_queue="bench", kube_task_queue="bench-kube",
                        rollout_poll_seconds=0.1, log_level="WARNING", log_format="json")
    client = await connect(settings, address=temporal.address)
    sha = _snapshot_sha(MODEL)
    async with running_in_process(client, WorkerDeps(settings=settings, db=pool)):
        started = await register_artifact(client, settings, source=f"hf:{MODEL}", sha=sha, requested_by="bench")
        handle = artifact_handle(client, started.id)
        # Polls a workflow query: the stage lives in another process, there is no local event to await.
        while (await handle.query(ArtifactWorkflow.status)).stage != "draft":  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await handle.execute_update(ArtifactWorkflow.review, ReviewRequest(decision="approve", draft_version=1,
                                                                           reviewer="approver"))
        await handle.result()
        row = await approved_artifact(pool, started.id)
        artifact = approved_artifact_from_row(row)
        print(f"approval → serving, {MODEL} on 1 × H200, simulated operator delay 0 s")
        for concurrent in (1, 10):
            async def one() -> tuple[float, WorkflowHandle]:
                request = WorkloadRequest(artifact_id=artifact.id, hardware="h200", layout="single_node_tp",
                                          replicas=1, gpus=1, name=f"bench-{uuid.uuid4().hex[:8]}")
                plan = plan_workload(request, artifact, load_catalog(), image=settings.vllm_runtime_image,
                                     namespace="default", hf_token_secret=None)
                t0 = time.perf_counter()
                wf = await create_workload(client, settings, plan=plan, requested_by="bench", repo_id=MODEL)
                while (await wf.query(WorkloadWorkflow.status)).stage != "serving":  # noqa: ASYNC110 (as above)
                    await asyncio.sleep(0.02)
                return time.perf_counter() - t0, wf
            t0 = time.perf_counter()
            runs = await asyncio.gather(*(one() for _ in range(concurrent)))
            times = [elapsed for elapsed, _ in runs]
            handles = [wf for _, wf in runs]
            wall = time.perf_counter() - t0
            print(f"  {concurrent:>2} concurrent: p50 {statistics.median(times):6.2f} s  max {max(times):6.2f} s  "
                  f"wall {wall:6.2f} s", flush=True)
            await asyncio.sleep(1)  # let the last registry writes land before ending the runs
            await asyncio.gather(*(h.terminate("benchmark done") for h in handles))
    await pool.close()


if __name__ == "__main__":
    asyncio.run(main())

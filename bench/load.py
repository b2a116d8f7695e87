"""Load: the API under concurrent callers, and the whole journey against bare Temporal.

    .venv/bin/python bench/load.py [--concurrency 8] [--resolves 2000] [--review-rounds 4] [--journeys 12]

Runs the real pieces as separate processes, as `wingsmith up` does: PostgreSQL, the Temporal dev
server, the simulated clusters (operator delay 0, so what is timed is the plane), the API (uvicorn)
and the worker; the offline Hub runs in this process so the benchmark can push new commits to it.

1. cached resolve: GET /v1/artifacts/resolve for the shipped models, `--concurrency` callers at once.
2. review updates: drafts registered on every shipped model, then approved all at once through
   POST /v1/artifacts/.../review (each a validated Temporal update), in `--review-rounds` rounds.
   One repository can hold one pending draft (a newer commit supersedes the older draft), so a round
   is one draft per model.
3. journey: register → draft → approve → workload → serving, through the API, on the models that fit
   one H200, one journey per model at a time, in rounds. After each round, the bare-Temporal baseline:
   as many workflows at once, each running the same number of no-op activities one after another (the
   count is read from the journeys' own histories, local activities included: the baseline runs every
   one as a regular activity, the plain way to run a step). Rounds alternate, so both see the same
   machine. overhead = journey time / baseline time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx
from gateway_speed import read_answer  # bench/gateway_speed.py's raw-socket answer reader
from stats import pct  # bench/stats.py (scripts run with bench/ on the path)

from sim.hub import shipped_models, start_hub_server
from wingsmith.local.ports import free_port
from wingsmith.local.postgres import LocalPostgres
from wingsmith.local.temporal_server import TemporalDevServer, stop_process, wait_for_port

OPERATOR, REVIEWER = "bench-operator", "bench-reviewer"
TOKENS = {OPERATOR: {"name": "ops", "roles": ["operator", "viewer"]},
          REVIEWER: {"name": "rev", "roles": ["approver", "viewer"]}}
# Models of the offline Hub whose recipe has an H200 layout that fits one node: the journey's subjects.
# (The Qwen3 and Llama-3.1 models of the snapshot have no vLLM recipe, so no tested command to deploy.)
JOURNEY_MODELS = ["openai/gpt-oss-120b", "openai/gpt-oss-20b", "meta-llama/Llama-3.3-70B-Instruct"]


JOURNEY_TIMEOUT = 300  # seconds; a journey slower than this is a finding, not a figure
# How often the bench asks whether a draft or a workload is there yet: the figure is late by half of
# this on average at each of the two waits (the baseline's client is told at once by Temporal). Asking
# more often is not free: each answer queries the live workflow, a workflow task on the worker.
POLL_SECONDS = 0.05


def line(name: str, samples: list[float], wall: float) -> str:
    ms = [s * 1000 for s in samples]
    return (f"{name:<16} n={len(ms):<5} {len(ms) / wall:8.1f}/s  p50={pct(ms, 50):8.1f} ms  "
            f"p99={pct(ms, 99):8.1f} ms")


@dataclass
class Plane:
    root: Path
    hub: object
    temporal: TemporalDevServer
    pg: LocalPostgres
    api_url: str
    env: dict[str, str]
    children: list[subprocess.Popen] = field(default_factory=list)
    gateway_url: str | None = None  # with_gateway: the plane's own router, routes pulled from the API

    def headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}


def start_plane(root: Path, *, extra_env: dict[str, str] | None = None, with_gateway: bool = False,
                gateway_args: tuple[str, ...] = (), operator_delay: float = 0.0) -> Plane:
    """`extra_env`: more settings for the API and the worker; `with_gateway`: the gateway too (`wingsmith up`'s
    command: an admin token in a file, the routes pulled from the API, and `gateway_args`)."""
    pg = LocalPostgres(root / "pg", free_port(), durable=False, log_file=root / "pg.log").start()
    temporal = TemporalDevServer(port=free_port(), ui_port=None, db_file=None, log_file=root / "temporal.log").start()
    os.environ["WINGSMITH_BENCH_HF_TOKEN"] = "bench-hub-token"
    hub = start_hub_server(grants={"*": {"bench-hub-token"}})
    sim_port, api_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_") or k == "WINGSMITH_BENCH_HF_TOKEN"}
    env.update(DATABASE_URL=pg.dsn(), TEMPORAL_ADDRESS=temporal.address, WINGSMITH_HOME=str(root / "home"),
               WINGSMITH_HF_ENDPOINT=hub.url, WINGSMITH_HF_TOKEN_REF="WINGSMITH_BENCH_HF_TOKEN",
               WINGSMITH_AUTH_TOKENS=json.dumps(TOKENS), WINGSMITH_API_PORT=str(api_port),
               WINGSMITH_ROLLOUT_POLL_SECONDS="0.1", WINGSMITH_UNSCHEDULABLE_GRACE_SECONDS="10",
               WINGSMITH_LOG_LEVEL="WARNING", WINGSMITH_LOG_FORMAT="json")
    gateway_port = free_port()
    if with_gateway:
        token = root / "gateway-admin-token"
        token.write_text(uuid.uuid4().hex)
        env.update(WINGSMITH_GATEWAY_URL=f"http://127.0.0.1:{gateway_port}",
                   WINGSMITH_GATEWAY_ADMIN_TOKEN_REF=f"file:{token}")
    env.update(extra_env or {})
    plane = Plane(root, hub, temporal, pg, f"http://127.0.0.1:{api_port}", env,
                  gateway_url=env.get("WINGSMITH_GATEWAY_URL") if with_gateway else None)

    def child(name: str, *cmd: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, *cmd], env=env, stdout=open(root / f"{name}.log", "ab"),
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        plane.children.append(proc)
        return proc

    try:  # a step that fails (a busy machine: the API slow to listen) leaves no server behind
        # The plane takes kubeconfig files only from its kubeconfig directory (default $WINGSMITH_HOME/kubeconfigs).
        sims = child("sim", "-m", "sim.kube", "--home", str(root / "sim"), "--port", str(sim_port),
                     "--kubeconfig", str(root / "home" / "kubeconfigs" / "sim.yaml"),
                     "--operator-delay", str(operator_delay))
        wait_for_port("127.0.0.1", sim_port, 30, sims)
        child("worker", "-m", "worker")
        api = child("api", "-m", "api")
        wait_for_port("127.0.0.1", api_port, 60, api)
        if with_gateway:
            gateway = child("gateway", "-m", "gateway", "--port", str(gateway_port), "--state-dir",
                            str(root / "gateway"), "--admin-token-ref", env["WINGSMITH_GATEWAY_ADMIN_TOKEN_REF"],
                            "--routes-source", plane.api_url, "--log-level", "WARNING", *gateway_args)
            wait_for_port("127.0.0.1", gateway_port, 30, gateway)
        # Straight into the registry, as `wingsmith up` does through the API with its admin token.
        _register_clusters(pg.dsn(), json.loads((root / "sim" / "clusters.json").read_text()))
    except BaseException:
        stop_plane(plane)
        raise
    return plane


def _register_clusters(dsn: str, described: dict) -> None:
    from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster
    from wingsmith.adapters.store.db import open_pool

    async def go() -> None:
        pool = await open_pool(dsn)
        for name, c in described["clusters"].items():
            await create_cluster(pool, ClusterSpec(name=name, region=c["region"], kubeconfig=described["kubeconfig"],
                                                   kube_context=c["context"],
                                                   frontend_base_url=c["frontend_base_url"]))
        await pool.close()
    asyncio.run(go())


def stop_plane(plane: Plane) -> None:
    for proc in reversed(plane.children):
        stop_process(proc, 10)
    plane.hub.stop()
    plane.temporal.stop()
    plane.pg.stop()


async def bounded(concurrency: int, jobs) -> list:
    gate = asyncio.Semaphore(concurrency)

    async def one(job):
        async with gate:
            return await job()
    return await asyncio.gather(*(one(j) for j in jobs))


async def raw_gets(base_url: str, requests: list[bytes], concurrency: int) -> list[float]:
    """Each of `requests` (whole HTTP/1.1 GETs, built once) sent once, `concurrency` kept-alive connections
    at a time, each sending its next as soon as it has its answer; every latency in seconds. The client is
    raw asyncio sockets, as bench/gateway_speed.py's throughput client: with httpx, the client took twice the
    API's CPU at 8 callers (its pool's per-request checks, reading and unzipping the answer), so the
    figures measured the client more than the API."""
    host, port = _host_port(base_url)
    latencies = [0.0] * len(requests)
    next_one = iter(range(len(requests)))

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for i in next_one:
                started = time.perf_counter()
                writer.write(requests[i])
                await read_answer(reader)
                latencies[i] = time.perf_counter() - started
        finally:
            writer.close()
    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return latencies


def _host_port(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def get_request(base_url: str, path: str, params: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> bytes:
    """A GET's bytes as a client sends them (gzip accepted, as httpx and browsers do)."""
    target = path + ("?" + urlencode(params) if params else "")
    lines = [f"GET {target} HTTP/1.1", f"Host: {urlsplit(base_url).netloc}", "Accept: */*",
             "Accept-Encoding: gzip, deflate", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def resolve_and_healthz(plane: Plane, http: httpx.AsyncClient, n: int,
                              concurrency: int, blocks: int = 20) -> tuple[list[float], list[float], float]:
    """Cached resolves and /healthz at the same concurrency, in short alternating blocks so both see the
    same machine (others' load comes and goes within seconds); returns (resolve latencies, healthz
    latencies, resolve wall seconds)."""
    models = shipped_models()
    head = plane.headers(OPERATOR)
    for repo in models:  # warm the cache: what follows is the cached path
        (await http.get("/v1/artifacts/resolve", params={"source": f"hf:{repo}"}, headers=head)).raise_for_status()
    per_block = n // blocks
    healthz = [get_request(plane.api_url, "/healthz")] * per_block
    resolve = [get_request(plane.api_url, "/v1/artifacts/resolve", {"source": f"hf:{models[i % len(models)]}"}, head)
               for i in range(per_block)]
    resolves: list[float] = []
    health: list[float] = []
    wall = 0.0
    for _ in range(blocks):
        health += await raw_gets(plane.api_url, healthz, concurrency)
        t0 = time.perf_counter()
        resolves += await raw_gets(plane.api_url, resolve, concurrency)
        wall += time.perf_counter() - t0
    return resolves, health, wall


async def bench_resolve(plane: Plane, http: httpx.AsyncClient, n: int, concurrency: int) -> list[str]:
    resolves, health, wall = await resolve_and_healthz(plane, http, n, concurrency)
    return [line("cached resolve", resolves, wall), line("  /healthz", health, wall),
            f"  p99 ratio      {pct(resolves, 99) / pct(health, 99):8.2f} × /healthz in the same run"]


async def new_draft(plane: Plane, http: httpx.AsyncClient, repo: str) -> str:
    """Push a new commit to the repo, register it, wait for its draft; returns the artifact id."""
    plane.hub.move_branch(repo, uuid.uuid4().hex + uuid.uuid4().hex[:8])
    r = await http.post("/v1/artifacts", json={"source": f"hf:{repo}"}, headers=plane.headers(OPERATOR))
    r.raise_for_status()
    artifact = r.json()["id"]
    while True:
        got = (await http.get(f"/v1/artifacts/{artifact}", headers=plane.headers(OPERATOR))).json()
        state = (got.get("live") or {}).get("stage") or got.get("state")
        if state == "draft" and got.get("draft"):
            return artifact
        if state in ("failed", "superseded", "expired"):
            raise RuntimeError(f"{artifact}: {state}: {got}")
        await asyncio.sleep(POLL_SECONDS)


async def approve(plane: Plane, http: httpx.AsyncClient, artifact: str) -> float:
    t = time.perf_counter()
    r = await http.post(f"/v1/artifacts/{artifact}/review", headers=plane.headers(REVIEWER),
                        json={"decision": "approve", "draft_version": 1, "comment": "bench"})
    r.raise_for_status()
    return time.perf_counter() - t


async def bench_reviews(plane: Plane, http: httpx.AsyncClient, rounds: int) -> str:
    models = shipped_models()
    samples: list[float] = []
    wall = 0.0
    for _ in range(rounds):
        drafts = await asyncio.gather(*(new_draft(plane, http, repo) for repo in models))
        t0 = time.perf_counter()
        samples += await asyncio.gather(*(approve(plane, http, a) for a in drafts))
        wall += time.perf_counter() - t0
    return line("review update", samples, wall)


async def journey(plane: Plane, http: httpx.AsyncClient, repo: str, gpus: int) -> tuple[str, str]:
    artifact = await new_draft(plane, http, repo)
    await approve(plane, http, artifact)
    name = f"load-{uuid.uuid4().hex[:10]}"
    r = await http.post("/v1/workloads", headers=plane.headers(OPERATOR),
                        json={"artifact_id": artifact, "name": name, "hardware": "h200", "layout": "single_node_tp",
                              "gpus": gpus})
    if r.status_code != 202:
        raise RuntimeError(f"workload for {artifact}: {r.status_code} {r.text}")
    give_up = time.monotonic() + JOURNEY_TIMEOUT
    while True:
        got = (await http.get(f"/v1/workloads/{name}", headers=plane.headers(OPERATOR))).json()
        stage = (got.get("live") or {}).get("stage") or got.get("state")
        if stage == "serving":
            return artifact, name
        if time.monotonic() > give_up:
            raise RuntimeError(f"{name} not serving after {JOURNEY_TIMEOUT} s: {got}")
        if stage in ("failed", "rolled_back", "deleted"):
            raise RuntimeError(f"{name}: {stage}: {got}")
        await asyncio.sleep(POLL_SECONDS)


async def deployable(plane: Plane, http: httpx.AsyncClient) -> dict[str, int]:
    """The journey models a dry run accepts on H200, each with the fewest GPUs it fits on (so the
    journeys fit the simulated clusters together); the others are reported."""
    found = {}
    for repo in JOURNEY_MODELS:
        artifact = await new_draft(plane, http, repo)
        await approve(plane, http, artifact)
        for gpus in (1, 2, 4, 8):
            r = await http.post("/v1/workloads", headers=plane.headers(OPERATOR),
                                json={"artifact_id": artifact, "hardware": "h200", "layout": "single_node_tp",
                                      "gpus": gpus, "dry_run": True})
            if r.status_code in (200, 202):
                found[repo] = gpus
                break
        else:
            print(f"  (journey leaves out {repo}: {r.json()['error']['message'][:100]})")
    return found


async def activities_per_journey(client, workload: str, artifact: str) -> tuple[int, int]:
    """Activities the journey ran, over every workflow it ran (artifact, workload, rollouts), as
    (all, of which local): a local activity leaves a marker in history instead of a scheduled event."""
    ids = [f"artifact/{artifact}", f"workload/{workload}"]
    async for wf in client.list_workflows(f"WorkflowId STARTS_WITH 'workload/{workload}/'"):
        ids.append(wf.id)
    regular = local = 0
    for wid in ids:
        async for event in client.get_workflow_handle(wid).fetch_history_events():
            regular += event.HasField("activity_task_scheduled_event_attributes")
            local += (event.HasField("marker_recorded_event_attributes")
                      and event.marker_recorded_event_attributes.marker_name == "core_local_activity")
    return regular + local, local


@contextlib.asynccontextmanager
async def bare_temporal(plane: Plane) -> AsyncIterator[Callable[[int, int], Awaitable[float]]]:
    """A worker for the baseline; yields `run(workflows, activities)`: that many workflows of that many
    no-op activities at once, in seconds."""
    from noop import NoopWorkflow, noop  # bench/noop.py: the sandbox re-imports workflows by module
    from temporalio.client import Client
    from temporalio.worker import Worker
    client = await Client.connect(plane.temporal.address)
    queue = f"baseline-{uuid.uuid4().hex[:6]}"

    async def run(workflows: int, activities: int) -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(client.execute_workflow(NoopWorkflow.run, activities, id=f"baseline-{uuid.uuid4()}",
                                                       task_queue=queue, execution_timeout=timedelta(minutes=10))
                               for _ in range(workflows)))
        return time.perf_counter() - t0
    async with Worker(client, task_queue=queue, workflows=[NoopWorkflow], activities=[noop]):
        yield run


@dataclass
class JourneyFigures:
    models: dict[str, int]          # repo → H200 GPUs per workload
    journeys: int
    wall: float                     # seconds for every journey
    latencies: list[float]          # seconds, one per journey
    activities: int                 # per journey, read from its histories
    local_activities: int           # of those, how many ran as local activities (the baseline's are all regular)
    baseline: float                 # seconds for as many bare-Temporal workflows of that many activities

    @property
    def overhead(self) -> float:
        return self.wall / self.baseline


async def measure_journey(plane: Plane, http: httpx.AsyncClient, journeys: int) -> JourneyFigures:
    """Rounds of one journey per model at once, each round followed by a round of as many bare-Temporal
    workflows with the journey's activity count: the two alternate, so both see the same machine."""
    from wingsmith.adapters.temporal import connect
    from wingsmith.domain.config import Settings
    models = await deployable(plane, http)
    if not models:
        raise RuntimeError("no journey model fits one H200 node")
    client = await connect(Settings(), address=plane.temporal.address)
    names = list(models)
    latencies: list[float] = []
    wall = base = 0.0
    activities = local = 0
    async with bare_temporal(plane) as bare:
        for start in range(0, journeys, len(names)):
            batch = names[:min(len(names), journeys - start)]

            async def timed(repo: str) -> tuple[str, str]:
                t = time.perf_counter()
                done = await journey(plane, http, repo, models[repo])
                latencies.append(time.perf_counter() - t)
                return done
            t0 = time.perf_counter()
            done = await asyncio.gather(*(timed(m) for m in batch))
            wall += time.perf_counter() - t0
            if not activities:
                activities, local = await activities_per_journey(client, done[0][1], done[0][0])
            base += await bare(len(batch), activities)
    return JourneyFigures(models, journeys, wall, latencies, activities, local, base)


async def bench_journey(plane: Plane, http: httpx.AsyncClient, journeys: int) -> list[str]:
    f = await measure_journey(plane, http, journeys)
    return [
        f"journey          {journeys} journeys on {len(f.models)} models "
        f"({', '.join(f'{m} on {g} H200' for m, g in f.models.items())}), {len(f.models)} at a time",
        f"  plane          {journeys / f.wall * 60:8.1f} artifacts registered+approved+serving per minute; "
        f"p50 {statistics.median(f.latencies):.2f} s, max {max(f.latencies):.2f} s per journey",
        f"  bare Temporal  {journeys / f.baseline * 60:8.1f} workflows of {f.activities} no-op activities per minute "
        f"(the journey ran {f.local_activities} of its activities as local activities)",
        f"  overhead       {f.overhead:8.2f} × the bare-Temporal time for the same activity count",
    ]


async def run(args: argparse.Namespace, plane: Plane) -> None:
    limits = httpx.Limits(max_connections=args.concurrency * 2)
    async with httpx.AsyncClient(base_url=plane.api_url, timeout=60, limits=limits) as http:
        print(f"load on {os.cpu_count()} cores: API (uvicorn, 1 process) + worker + Temporal dev server + "
              f"Postgres + simulated clusters (operator delay 0) + offline Hub", flush=True)
        for text in await bench_resolve(plane, http, args.resolves, args.concurrency):
            print(text, flush=True)
        # Zero rounds or journeys skips that part (there would be no figure to divide by).
        if args.review_rounds > 0:
            print(await bench_reviews(plane, http, args.review_rounds), flush=True)
        if args.journeys > 0:
            for text in await bench_journey(plane, http, args.journeys):
                print(text, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent API callers for cached resolve")
    parser.add_argument("--resolves", type=int, default=2000)
    parser.add_argument("--review-rounds", type=int, default=4, help="rounds of one draft per shipped model (0: skip)")
    parser.add_argument("--journeys", type=int, default=12, help="0: skip the journey")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="wingsmith-load-"))
    plane = start_plane(root)
    try:
        asyncio.run(run(args, plane))
    finally:
        stop_plane(plane)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

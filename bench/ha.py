"""The replicated plane under SIGKILL: 2 APIs, 2 workers per task queue and 2 gateways against one
Temporal and one Postgres, each started from the command and environment the production overlay
renders (tests/deploy/render.py), with only addresses, ports and local directories changed.

Under steady chat traffic through both gateways, a stream of API calls and a stream of workflows,
one API, one worker of each queue and one gateway are SIGKILLed, then started again. Reported:
- workflows lost or stuck: started but not completed by the end (after a grace period);
- chats failed for a client that retries once on the other gateway (and before that retry);
- API calls that failed other than 503 with Retry-After, for a client that retries once on the other
  API on a refused connection (what a Service does once the dead pod is out of its endpoints).

What it leaves out: Temporal runs without TLS (the overlay's TEMPORAL_TLS_* are dropped; mTLS has its
own test), no cluster is registered, so the kube and observe workers are killed and restarted but get
no work, and the workflows are PingWorkflows on the orchestration queue.

    .venv/bin/python bench/ha.py [--seconds 40] [--kill-after 12] [--down-for 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.deploy.render import KUSTOMIZE, by_kind, processes, render  # noqa: E402
from tests.gateway.conftest import MODEL, ScriptedBackend  # noqa: E402
from wingsmith.local.ports import free_port  # noqa: E402
from wingsmith.local.postgres import LocalPostgres  # noqa: E402
from wingsmith.local.temporal_server import TemporalDevServer, stop_process, wait_for_port  # noqa: E402

KILLED = ("wingsmith-api", "wingsmith-gateway", "wingsmith-worker-orchestration", "wingsmith-worker-kube",
          "wingsmith-worker-observe")
REPLICAS = 2


@dataclass
class Replica:
    deployment: str
    index: int
    cmd: list[str]
    env: dict[str, str]
    port: int
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def name(self) -> str:
        return f"{self.deployment}-{self.index}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                         start_new_session=True)

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@dataclass
class Tally:
    ok: int = 0
    failed_first: int = 0  # failed on the first replica tried
    failed: list[str] = field(default_factory=list)  # failed after the one retry
    retry_hints: int = 0  # 503 with Retry-After: an answer the client knows what to do with


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="length of the traffic")
    parser.add_argument("--kill-after", type=float, default=12.0)
    parser.add_argument("--down-for", type=float, default=5.0)
    parser.add_argument("--workflow-grace", type=float, default=60.0)
    parser.add_argument("--json", type=Path)
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="wingsmith-ha-") as tmp:
        figures = asyncio.run(run(args, Path(tmp)))
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    os._exit(0)  # PITFALLS: a process that used a Temporal client may abort at exit


async def run(args: argparse.Namespace, tmp: Path, seen: dict | None = None) -> dict:
    """The figures; every process it starts is stopped when it returns or raises. `seen` (a test's) gets
    what the plane was started from: "secrets" (the values given to the rendering), "objects" (the
    production overlay, rendered), "rendered" (its processes) and "replicas" (what was started)."""
    seen = {} if seen is None else seen
    pg = LocalPostgres(tmp / "pg", free_port(), durable=False, log_file=tmp / "postgres.log").start()
    temporal = TemporalDevServer(port=free_port(), ui_port=None, db_file=None, log_file=tmp / "temporal.log").start()
    backend = ScriptedBackend("stub")
    replicas: list[Replica] = []
    try:
        payload_key = base64.b64encode(os.urandom(32)).decode()
        os.environ["WINGSMITH_BENCH_PAYLOAD_KEY"] = payload_key  # this process's client encrypts as the plane does
        gateway_token = secrets.token_urlsafe(24)
        api_token = secrets.token_urlsafe(24)
        secret_values = {
            ("wingsmith-postgres", "database-url"): pg.dsn(),
            ("wingsmith-gateway-admin", "token"): gateway_token,
            ("wingsmith-api-tokens", "tokens.json"): json.dumps({api_token: {"name": "bench", "roles": ["admin"]}}),
            ("wingsmith-hf-token", "token"): "hf_bench",
            ("wingsmith-payload-key", "key"): payload_key,
        }
        objects = render(KUSTOMIZE / "overlays" / "production")
        rendered = processes(objects, secret_values)
        seen.update(secrets=secret_values, objects=objects, rendered=rendered)
        namespace = rendered["wingsmith-api"].env.get("TEMPORAL_NAMESPACE", "default")
        await _register_namespace(temporal.address, namespace)
        replicas = _replicas(rendered, tmp, temporal.address, gateway_token)
        seen["replicas"] = replicas
        # The migration step the overlay renders, once, before anything serves.
        migrate = rendered["wingsmith-api"].init[0]
        await asyncio.to_thread(subprocess.run, _local(migrate.command), check=True, cwd=ROOT, capture_output=True,
                                env=_env(migrate.env, temporal.address, tmp / "migrate"))
        started = time.monotonic()
        for r in replicas:
            r.start()
        apis = [r for r in replicas if r.deployment == "wingsmith-api"]
        gateways = [r for r in replicas if r.deployment == "wingsmith-gateway"]
        for r in [*apis, *gateways]:
            wait_for_port("127.0.0.1", r.port, 120, r.proc, r.name)
        boot = time.monotonic() - started

        from wingsmith.adapters.store.db import open_pool
        from wingsmith.adapters.store.gateway_routes import publish
        from wingsmith.domain.gateway.routes import Backend, EndpointRoutes
        pool = await open_pool(pg.dsn(), max_size=1)
        await publish(pool, EndpointRoutes(model_name=MODEL, backends=[
            Backend(id="bench/stub", cluster="bench", workload_id="bench", url=backend.url, weight=1)]))
        await pool.close()
        for g in gateways:
            await _until(lambda g=g: _models(g.url) == [MODEL], 60, f"{g.name} pulled the routes")

        from contracts.ping import PingWorkflowInput
        from wingsmith.adapters.temporal import connect
        from wingsmith.domain.config import Settings
        from workflows.ping import PingWorkflow
        client = await connect(Settings(payload_key_ref="WINGSMITH_BENCH_PAYLOAD_KEY", temporal_namespace=namespace),
                               address=temporal.address)

        stop = threading.Event()
        chats, calls = Tally(), Tally()
        threads = [threading.Thread(target=_chat, args=(gateways, chats, stop), daemon=True),
                   threading.Thread(target=_call, args=(apis, api_token, calls, stop), daemon=True)]
        for t in threads:
            t.start()
        workflow_ids: list[str] = []
        kill_at = time.monotonic() + args.kill_after
        end = time.monotonic() + args.seconds
        killed: list[Replica] = []
        restarted = False
        while time.monotonic() < end:
            wid = f"ha-{uuid.uuid4().hex[:10]}"
            try:
                await client.start_workflow(PingWorkflow.run, PingWorkflowInput(message=wid), id=wid,
                                            task_queue="wingsmith")
                workflow_ids.append(wid)
            except Exception as exc:  # noqa: BLE001 - Temporal itself is not killed: a failure here is a finding
                print(f"could not start {wid}: {exc}", file=sys.stderr)
            now = time.monotonic()
            if not killed and now >= kill_at:
                killed = [next(r for r in replicas if r.deployment == d and r.index == 0) for d in KILLED]
                for r in killed:
                    r.kill()
                print(f"killed {', '.join(r.name for r in killed)}", file=sys.stderr)
            elif killed and not restarted and now >= kill_at + args.down_for:
                for r in killed:
                    r.start()
                restarted = True
                print(f"started {', '.join(r.name for r in killed)} again", file=sys.stderr)
            await asyncio.sleep(0.25)
        stop.set()
        for t in threads:
            t.join(15)

        unfinished = await _unfinished(client, workflow_ids, args.workflow_grace)
        # Back: running and answering the readiness probe its Deployment renders (given time to start).
        probes = _readiness_paths(objects)
        back = {r.name: await _ready(r, probes[r.deployment], 30) for r in killed}
        dead = {r.name: r.log.read_text(errors="replace").splitlines()[-4:] for r in replicas if not _alive(r)}
        return {
            "boot_seconds": round(boot, 1),
            "killed": [r.name for r in killed], "down_seconds": args.down_for, "back": back,
            "workflows_started": len(workflow_ids), "workflows_lost_or_stuck": len(unfinished),
            "chats_answered": chats.ok, "chats_failed_before_retry": chats.failed_first,
            "chats_failed_after_one_retry": len(chats.failed), "chat_failures": chats.failed[:10],
            "api_calls_ok": calls.ok, "api_calls_503_with_retry_after": calls.retry_hints,
            "api_calls_failed_before_retry": calls.failed_first,
            "api_calls_failed_otherwise": len(calls.failed), "api_failures": calls.failed[:10],
            "dead_at_the_end": dead, "load_average": os.getloadavg()[0], "cpus": os.cpu_count(),
        }
    finally:
        for r in replicas:  # all at once: each worker takes seconds to shut down
            if r.proc is not None and r.proc.poll() is None:
                r.proc.terminate()
        for r in replicas:
            stop_process(r.proc, 10)
        backend.stop()
        temporal.stop()
        pg.stop()


def _replicas(rendered: dict, tmp: Path, temporal_address: str, gateway_token: str) -> list[Replica]:
    """Two of each Deployment the bench kills, with local ports and directories."""
    out: list[Replica] = []
    api_ports = [free_port() for _ in range(REPLICAS)]
    gateway_ports = [free_port() for _ in range(REPLICAS)]
    for name in KILLED:
        p = rendered[name]
        for i in range(REPLICAS):
            home = tmp / f"{name}-{i}"
            home.mkdir()
            env = _env(p.env, temporal_address, home)
            env["WINGSMITH_API_PORT"] = str(api_ports[i])
            env["WINGSMITH_WORKER_METRICS_PORT"] = str(free_port())
            # The plane pushes to one replica: the gateway Service's stand-in.
            env["WINGSMITH_GATEWAY_URL"] = f"http://127.0.0.1:{gateway_ports[0]}"
            cmd = _local(p.command)
            port = api_ports[i] if name == "wingsmith-api" else int(env["WINGSMITH_WORKER_METRICS_PORT"])
            if name == "wingsmith-gateway":
                port = gateway_ports[i]
                cmd = _replace_arg(_replace_arg(_replace_arg(cmd, "--port", str(port)), "--host", "127.0.0.1"),
                                   "--state-dir", str(home / "gateway"))
                # No Service in front of the APIs here: each gateway pulls from one of them.
                env["WINGSMITH_GATEWAY_ROUTES_SOURCE"] = f"http://127.0.0.1:{api_ports[i]}"
                env.pop("WINGSMITH_GATEWAY_CLIENT_KEYS_REF", None)  # endpoints open, as without the Secret
            out.append(Replica(name, i, cmd, env, port, tmp / f"{name}-{i}.log"))
    return out


def _env(rendered: dict[str, str], temporal_address: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in rendered.items() if not k.startswith("TEMPORAL_TLS_")}
    home.mkdir(parents=True, exist_ok=True)
    (home / "kubeconfigs").mkdir(exist_ok=True)
    env.update(PATH=os.environ.get("PATH", ""), TEMPORAL_ADDRESS=temporal_address, WINGSMITH_HOME=str(home),
               WINGSMITH_API_HOST="127.0.0.1", WINGSMITH_WORKER_METRICS_HOST="127.0.0.1",
               WINGSMITH_KUBECONFIG_DIR=str(home / "kubeconfigs"))
    return env


def _local(command: list[str]) -> list[str]:
    return [sys.executable if command[0] == "python" else command[0], *command[1:]]


def _replace_arg(cmd: list[str], flag: str, value: str) -> list[str]:
    i = cmd.index(flag)
    return [*cmd[: i + 1], value, *cmd[i + 2:]]


def _models(gateway: str) -> list[str]:
    try:
        return [m["id"] for m in httpx.get(f"{gateway}/v1/models", timeout=2).json()["data"]]
    except (httpx.HTTPError, ValueError, KeyError):
        return []


def _alive(r: Replica) -> bool:
    return r.proc is not None and r.proc.poll() is None


def _readiness_paths(objects: list[dict]) -> dict[str, str]:
    """Deployment → the path of its (first) container's HTTP readiness probe, as rendered (if it has one: the
    perf worker's probe is a command, which the bench does not run)."""
    containers = {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]
                  for d in by_kind(objects, "Deployment")}
    return {name: c["readinessProbe"]["httpGet"]["path"] for name, c in containers.items()
            if "httpGet" in c.get("readinessProbe", {})}


async def _ready(r: Replica, path: str, within: float) -> bool:
    def answers() -> bool:
        try:
            return httpx.get(f"{r.url}{path}", timeout=3).status_code == 200
        except httpx.HTTPError:
            return False
    deadline = time.monotonic() + within
    while _alive(r):
        if await asyncio.to_thread(answers):
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.5)
    return False


def _chat(gateways: list[Replica], tally: Tally, stop: threading.Event) -> None:
    """Chats through both gateways in turn; a failed one is retried once on the other gateway."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=5) as http:
        turn = 0
        while not stop.is_set():
            turn += 1
            order = gateways if turn % 2 else list(reversed(gateways))
            errors = []
            for g in order:
                try:
                    r = http.post(f"{g.url}/v1/chat/completions", json=body)
                    if r.status_code == 200:
                        tally.ok += 1
                        break
                    errors.append(f"{g.name}: HTTP {r.status_code}")
                except httpx.HTTPError as exc:
                    errors.append(f"{g.name}: {type(exc).__name__}")
            else:
                tally.failed.append("; ".join(errors))
            tally.failed_first += bool(errors)
            stop.wait(0.05)


def _call(apis: list[Replica], token: str, tally: Tally, stop: threading.Event) -> None:
    """API reads, to a random replica; a refused connection is retried once on the other one."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=10, headers=headers) as http:
        while not stop.is_set():
            order = random.sample(apis, len(apis))
            path = random.choice(["/v1/endpoints", "/v1/clusters", "/v1/workloads"])
            for attempt, api in enumerate(order):
                try:
                    r = http.get(f"{api.url}{path}")
                except httpx.TransportError as exc:
                    if attempt == 0:
                        tally.failed_first += 1
                        continue
                    tally.failed.append(f"{api.name} {path}: {type(exc).__name__}")
                    break
                if r.status_code == 200:
                    tally.ok += 1
                elif r.status_code == 503 and "retry-after" in r.headers:
                    tally.retry_hints += 1
                else:
                    tally.failed.append(f"{api.name} {path}: HTTP {r.status_code} {r.text[:120]}")
                break
            stop.wait(0.1)


async def _unfinished(client, workflow_ids: list[str], grace: float) -> list[str]:
    deadline = time.monotonic() + grace
    pending = list(workflow_ids)
    while pending and time.monotonic() < deadline:
        still = []
        for wid in pending:
            desc = await client.get_workflow_handle(wid).describe()
            if desc.status is None or desc.status.name != "COMPLETED":
                still.append(wid)
        pending = still
        if pending:
            await asyncio.sleep(1)
    return pending


async def _register_namespace(address: str, namespace: str) -> None:
    """The overlay's namespace on the dev server, usable (with the plane's search attributes) before
    any worker starts: a worker that cannot describe its namespace exits."""
    from google.protobuf.duration_pb2 import Duration
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
    from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
    from temporalio.service import RPCError

    from wingsmith.adapters.temporal import connect
    from wingsmith.domain.config import SEARCH_ATTRIBUTES, Settings
    if namespace == "default":
        return
    root = await connect(Settings(), address=address)
    await root.workflow_service.register_namespace(RegisterNamespaceRequest(
        namespace=namespace, workflow_execution_retention_period=Duration(seconds=24 * 3600)))
    kinds = {"Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
             "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
             "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT}
    for _ in range(150):  # a new namespace takes a moment to reach the frontend's cache
        try:
            await root.operator_service.add_search_attributes(AddSearchAttributesRequest(
                namespace=namespace, search_attributes={n: kinds[k] for n, k in SEARCH_ATTRIBUTES.items()}))
            return
        except RPCError:
            await asyncio.sleep(0.2)
    raise TimeoutError(f"namespace {namespace} did not become usable")


async def _until(check, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {within} s: {what}")
        await asyncio.sleep(0.3)


if __name__ == "__main__":
    main()

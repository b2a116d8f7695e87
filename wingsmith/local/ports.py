"""The ports `wingsmith up` is about to serve on, checked before any part starts.

A port in use is named in one line with what holds it (a pid and its command line, found through
/proc on Linux): most often parts of an earlier plane, or a server of the same kind. Without the check
the part dies on bind with a Python traceback among its last words, or, worse, `up` finds the port
answering (the other process) and carries on with a part that is not its own.
"""

from __future__ import annotations

import errno
import os
import random
import socket
from dataclasses import dataclass
from pathlib import Path

from wingsmith.domain.config import Settings

_LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp
_COMMAND_LIMIT = 160


@dataclass(frozen=True)
class PlanePort:
    part: str  # in the user's words: "Temporal", "the API"
    host: str
    port: int
    setting: str  # the variable that moves it

    def problem(self) -> str | None:
        """Why the part could not listen here, in one line; None when it can."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            # As the servers themselves bind: a port whose last connections linger in TIME_WAIT is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host, self.port))
                return None
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    return f"{self.part} cannot listen on {self.host}:{self.port}: {exc.strerror}"
        return (f"port {self.port} ({self.part}) is in use by {holder(self.port)}: stop it, or set {self.setting} "
                "to another port")


def plane_ports(settings: Settings, *, offline_hub: bool, simulated_clusters: bool) -> list[PlanePort]:
    """Every port this `up` will serve on (not those of parts pointed elsewhere), in starting order."""
    from wingsmith.adapters.temporal import configured_address
    s = settings
    loopback = "127.0.0.1"

    def port(part: str, field: str, host: str = loopback) -> PlanePort:
        return PlanePort(part, host, getattr(s, field), f"WINGSMITH_{field.upper()}")

    ports = []
    if not s.database_url:
        ports.append(port("Postgres", "postgres_port"))
    if not configured_address(s):
        ports += [port("Temporal", "temporal_port"), port("the Temporal UI", "temporal_ui_port")]
    if offline_hub:
        ports.append(port("the offline Hub", "offline_hub_port"))
    if s.gateway == "local" and not s.gateway_admin_token_ref:
        ports.append(port("the gateway", "gateway_port"))
    if simulated_clusters:
        ports.append(port("the simulated clusters", "simulated_clusters_port"))
    if s.worker_metrics_port:
        ports.append(port("the worker's metrics", "worker_metrics_port", s.worker_metrics_host))
    ports.append(port("the API", "api_port", s.api_host))
    return ports


def holder(port: int) -> str:
    """`pid 123 (its command line)` of the process listening on `port`, or why it cannot be named."""
    inodes = _listening_sockets(port)
    if not inodes:
        return "another process"  # not Linux, or a listener this machine's /proc does not show
    for pid in sorted(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()):  # a parent before its forks
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return f"pid {pid} ({_command(pid)})"
    return "a process of another user"


def _listening_sockets(port: int) -> set[str]:
    """The inodes of the sockets listening on `port` (IPv4 and IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _command(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "command line not readable"
    line = " ".join(w.decode(errors="replace") for w in words if w)
    return line if len(line) <= _COMMAND_LIMIT else line[: _COMMAND_LIMIT - 1] + "…"


# Where a port for a server to bind later is drawn from: below the kernel's ephemeral range. A port from
# bind(0) lies inside that range, and between its release here and the server's own bind the kernel may hand
# it to any outgoing connection or another bind(0) (a CI run saw a Temporal dev server take the port chosen
# for an offline Hub). Below the range only another explicit choice can take it.
_LOWEST_PORT = 20000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _first_ephemeral_port() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; elsewhere the range is read nowhere, and this bound is as good


def _binds(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# Ports this process handed out: never given twice, since the server meant for one may not have bound it yet.
_GIVEN: set[int] = set()


def free_port() -> int:
    """A port free on 127.0.0.1 now, below the ephemeral range where it can (bind(0)'s choice otherwise)."""
    candidates = range(_LOWEST_PORT, _first_ephemeral_port())
    pick = random.SystemRandom()
    for _ in range(64 if len(candidates) > 1000 else 0):
        port = pick.choice(candidates)
        if port not in _GIVEN and _binds(port):
            _GIVEN.add(port)
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

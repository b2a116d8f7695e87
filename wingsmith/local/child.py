"""One part of the local plane as a child process of `up`, and what `up` does when it dies.

A child that dies is started again after a back-off, and `up` says which one died and its last words
(the end of its log, where its stderr goes). Only a child that keeps failing at start makes `up` give
up: dying soon after each start, several times in a row, means a port clash or a broken setting that
another try will not mend, and a plane that silently cycles a dead part is worse than one that stops
and says why. A child that ran a while before dying is restarted at once, however often that happens.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wingsmith.adapters.startup import EXIT_MISCONFIGURED
from wingsmith.local.launcher import start_part
from wingsmith.local.private import open_private_log

LOG_TAIL_LINES = 20
LAST_WORDS_LINES = 8
FIRST_DELAY = 0.5  # seconds before a restart; doubles with each failure at start
MAX_DELAY = 8.0
START_GRACE = 30.0  # a child that dies sooner than this after its start failed at start (a loaded laptop
# takes several seconds just to import the API)
GIVE_UP_AFTER = 5  # failures at start in a row
NEXT_SPARE_AFTER = 5.0  # seconds after a spare took over before the next one starts


class ChildKeepsFailing(RuntimeError):
    """A child failed at start GIVE_UP_AFTER times in a row."""


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").rstrip("\n").splitlines()[-lines:]
    except OSError:
        return "    (no log)"
    return "\n".join(f"    {line}" for line in text) or "    (empty log)"


def how_it_ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with {code}"


@dataclass
class Child:
    name: str
    cmd: list[str]
    env: dict[str, str]
    log_path: Path
    pass_fds: tuple[int, ...] = ()  # e.g. a listening socket `up` holds across the child's restarts
    process: subprocess.Popen | None = None
    restarts: int = 0
    failed_starts: int = 0  # in a row: reset by a run longer than START_GRACE
    started_at: float = 0.0
    restart_at: float | None = None  # set while it waits out its back-off

    def start(self) -> None:
        with open_private_log(self.log_path) as log:
            # Killed outright when `up` is: an orderly stop would wait on Postgres and Temporal, which go
            # at the same moment (the API's waited minutes on its pool). Every part's state survives a kill.
            self.process = start_part(self.cmd, when_orphaned=signal.SIGKILL, env=self.env, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, pass_fds=self.pass_fds)
        self.started_at = time.monotonic()
        self.restart_at = None

    def died(self, when: str = "") -> str:
        """Why it stopped, in its own last words: a child that dies at start says why only in its log."""
        code = self.process.returncode if self.process else None
        return f"{self.name} {how_it_ended(code)}{when}; last lines of {self.log_path}:\n{log_tail(self.log_path)}"

    def check(self, now: float | None = None) -> str | None:
        """Restart it if it died (after its back-off); what happened, for the log. Raises
        ChildKeepsFailing when it has failed at start too often in a row."""
        now = time.monotonic() if now is None else now
        if self.restart_at is not None:
            if now < self.restart_at:
                return None
            self.restarts += 1
            try:
                self.start()
            except (RuntimeError, TimeoutError, OSError) as exc:
                # Counted as a failure at start when the next check finds it dead.
                return f"{self.name}: could not start again (restart {self.restarts}): {exc}"
            pid = self.process.pid if self.process else "?"
            return f"{self.name}: started again (restart {self.restarts}, pid {pid})"
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            return None
        ran = now - self.started_at
        self.failed_starts = self.failed_starts + 1 if ran < START_GRACE else 0
        last_words = f"its last words ({self.log_path}):\n{log_tail(self.log_path, LAST_WORDS_LINES)}"
        if code == EXIT_MISCONFIGURED:
            raise ChildKeepsFailing(f"{self.name} {how_it_ended(code)} (its settings are wrong: starting it again "
                                    f"cannot help); giving up. {last_words}")
        if self.failed_starts >= GIVE_UP_AFTER:
            raise ChildKeepsFailing(
                f"{self.name} {how_it_ended(code)} {self.failed_starts} times in a row within "
                f"{START_GRACE:.0f} s of its start; giving up. {last_words}")
        delay = min(FIRST_DELAY * 2 ** max(self.failed_starts - 1, 0), MAX_DELAY)
        self.restart_at = now + delay
        return f"{self.name} {how_it_ended(code)} after {ran:.1f} s; starting it again in {delay:g} s. {last_words}"

    def stop(self, timeout: float = 15) -> None:
        self.ask_to_stop()
        self.wait_stopped(time.monotonic() + timeout)

    @property
    def stop_signal(self) -> signal.Signals:
        return signal.SIGTERM

    def ask_to_stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(self.stop_signal)

    def wait_stopped(self, deadline: float) -> None:
        """Until it has ended; killed if it still runs at `deadline`."""
        if self.process is None:
            return
        try:
            self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def stop_all(children: list[Child], timeout: float = 15) -> None:
    """The parts all at once, then the servers they use (Temporal, Postgres; neither needs the other) all at
    once: stopping takes as long as the slowest of each kind rather than as long as all of them in turn."""
    for kind in ([child for child in children if not isinstance(child, ServerChild)],
                 [child for child in children if isinstance(child, ServerChild)]):
        for child in kind:
            child.ask_to_stop()
        deadline = time.monotonic() + timeout
        for child in kind:
            child.wait_stopped(deadline)


@dataclass
class ServerChild(Child):
    """A server with its own start (which waits until it listens) and stop: Postgres, Temporal."""

    server: Any = None

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.restart_at = None
        try:
            self.server.start()
        finally:
            self.process = self.server.process

    def stop(self, timeout: float = 15) -> None:
        self.server.stop(timeout)

    @property
    def stop_signal(self) -> signal.Signals:
        return self.server.STOP_SIGNAL


@dataclass
class Spare(Child):
    """A warm spare of another child: the same command, told by `standby_env` which pipe to wait on.
    It does its slow start (imports) and then waits for one byte; `take` promotes it."""

    standby_env: str = ""
    promote_fd: int | None = None

    def start(self) -> None:
        self._close_pipe()
        read_fd, self.promote_fd = os.pipe()
        env, fds = self.env, self.pass_fds
        self.env, self.pass_fds = {**env, self.standby_env: str(read_fd)}, (*fds, read_fd)
        try:
            super().start()
        finally:
            self.env, self.pass_fds = env, fds
            os.close(read_fd)

    def take(self) -> subprocess.Popen | None:
        """The spare's process, told to serve; None when there is none. The next spare starts a while
        later, so its imports do not slow the one that just took over."""
        if self.process is None or self.process.poll() is not None or self.promote_fd is None:
            return None
        try:
            os.write(self.promote_fd, b"1")
        except OSError:
            return None
        promoted, self.process = self.process, None
        self._close_pipe()
        self.restart_at = time.monotonic() + NEXT_SPARE_AFTER
        return promoted

    def ask_to_stop(self) -> None:
        self._close_pipe()  # a spare that was never promoted reads the end of the pipe and leaves
        super().ask_to_stop()

    def _close_pipe(self) -> None:
        if self.promote_fd is not None:
            os.close(self.promote_fd)
            self.promote_fd = None


@dataclass
class WarmChild(Child):
    """A child whose restart promotes its warm spare when one is ready: back in about a second instead
    of a cold start's many (most of the API's start is importing)."""

    spare: Spare | None = None

    def start(self) -> None:
        promoted = self.spare.take() if self.spare is not None else None
        if promoted is None:
            super().start()
            return
        self.process = promoted
        self.started_at = time.monotonic()
        self.restart_at = None

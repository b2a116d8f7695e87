"""Starting a part of the local plane so that it dies with `wingsmith up`, however `up` ends.

`up` starts each part in a session of its own, so that a Ctrl-C in the terminal reaches `up` alone and
`up` stops the parts in order. Killed itself (SIGKILL, the OOM killer, a closed terminal), `up` stops
nothing, and parts in sessions of their own would live on holding every port. So on Linux each part
starts through this file: run as a script, it asks the kernel for a signal when its parent dies
(prctl PR_SET_PDEATHSIG), then becomes the part (exec). The request survives exec for binaries that
are not set-user-ID (the Temporal CLI, postgres: the postmaster's own children leave when it does).
Asked in a launcher rather than in `preexec_fn`, which is unsafe in a process with threads.

    python -I -S launcher.py --parent PID --signal SIGTERM [--user NAME] -- COMMAND...

Two edges of the kernel's rule:
- "parent" is the *thread* that started the child: a part started from a thread that ends would be
  signalled then. `start_part` therefore refuses any thread but the main one.
- the parent may die between the fork and the request: the launcher then finds another parent
  and does not start the part.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
TIES_TO_PARENT = sys.platform.startswith("linux")


def start_part(cmd: list[str], *, dies_with_parent: bool = True, when_orphaned: signal.Signals = signal.SIGTERM,
               user: str | None = None, **popen: Any) -> subprocess.Popen:
    """`Popen(cmd)` in a session of its own that, `dies_with_parent`, receives `when_orphaned` when this
    process dies. `user`: run it as that user (as `Popen(user=)`)."""
    if dies_with_parent and TIES_TO_PARENT:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("a part of the plane must be started from the main thread: the kernel signals "
                               "it when the thread that started it ends")
        cmd = [sys.executable, "-I", "-S", __file__, "--parent", str(os.getpid()), "--signal", when_orphaned.name,
               *(["--user", user] if user else []), "--", *cmd]
        user = None  # the launcher changes user itself, before its request (a change of user clears it)
    return subprocess.Popen(cmd, user=user, start_new_session=True, **popen)


def _become(user: str) -> None:
    import pwd
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)


def _die_with_parent(libc: ctypes.CDLL, when_orphaned: signal.Signals) -> None:
    if libc.prctl(PR_SET_PDEATHSIG, int(when_orphaned), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")


def main(argv: list[str]) -> None:
    import argparse
    parser = argparse.ArgumentParser(prog="launcher.py", description=__doc__.splitlines()[0])
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--signal", required=True, choices=[s.name for s in signal.Signals], metavar="SIGNAL")
    parser.add_argument("--user")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to start")
    # Loaded first: another user may not read this Python's files (postgres's user, for one).
    libc = ctypes.CDLL(None, use_errno=True)
    if args.user:
        _become(args.user)  # before the request, which a change of user clears
    _die_with_parent(libc, signal.Signals[args.signal])
    if os.getppid() != args.parent:
        print(f"launcher: {args.parent} ended before {command[0]} started; not starting it", file=sys.stderr)
        sys.exit(1)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"launcher: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Checking a kubeconfig's content in a process of its own, for callers with an event loop (the API).

The loader's limits bound the work (wingsmith/adapters/kube/kubeconfig.py: ~0.2 s of CPU to refuse a document
past them, ~0.7 s for one just within), but in a thread of the API's process that work still holds
the GIL: each time the event loop lets go of it (every socket read and write) it waits up to the
5 ms switch interval to get it back, and /healthz answered in 150 ms at p99 while a 640 KB fleet
kubeconfig parsed in a thread (measured; tests/kube_input/test_kubeconfig_off_the_loop.py). So the
parse and the checks run in a child process: started by the forkserver (the API holds a Temporal
client and a Postgres pool, which do not survive a plain fork(), and a forkserver child costs ~60 ms
against ~200 ms for a spawned one), given the bytes, answering only whether the content passed and
why not, and killed at a deadline, so even a cost the limits missed cannot hold anything for long.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from wingsmith.adapters.kube.kube_error import KubeError
from wingsmith.adapters.kube.kubeconfig import (
    KubeconfigBeyondLimit,
    KubeconfigPolicy,
    KubeconfigSource,
    check_config,
    describe,
    parse_content,
    refused,
)

# Within the limits a check takes under 1 s here; past this the child is killed and the kubeconfig
# refused, naming the bound.
CHECK_SECONDS = 5.0

_context_lock = threading.Lock()
_context: Any = None


def _processes() -> Any:
    """The forkserver context, its server preloading the loader (so each child starts without imports)."""
    global _context
    with _context_lock:
        if _context is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload([__name__])
            _context = ctx
        return _context


def check_in_child(content: bytes, context: str | None, policy: KubeconfigPolicy, source: KubeconfigSource,
                   *, seconds: float = CHECK_SECONDS) -> str:
    """Parse and check `content` in a child process; the context's name, or the loader's KubeError.
    Blocks (the child's start and answer): call it from a thread when an event loop is waiting."""
    ctx = _processes()
    answers, answer_end = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(answer_end, content, context, policy, source), daemon=True,
                        name="kubeconfig-check")
    try:
        child.start()
        answer_end.close()
        deadline = time.monotonic() + seconds
        if not answers.poll(max(0.0, deadline - time.monotonic())):
            raise KubeconfigBeyondLimit(f"{describe(source)} took more than {seconds:g} s to read and check (one "
                                        "within the limits takes under 1 s)", limit="max_seconds", bound=int(seconds))
        try:
            outcome = answers.recv()
        except EOFError:  # the child ended without answering (killed, out of memory)
            raise refused("KubeconfigInvalid", f"{describe(source)} could not be checked (the check's process "
                                               f"ended with code {child.exitcode})") from None
    finally:
        answers.close()
        if child.is_alive():
            child.kill()
        if child.pid is not None:
            child.join(timeout=5)
    kind, message, limit, bound = outcome
    if kind is None:
        return str(message)
    if limit is not None:
        raise KubeconfigBeyondLimit(message, limit=limit, bound=bound)
    raise refused(kind, message)


def _child(answer: Connection, content: bytes, context: str | None, policy: KubeconfigPolicy,
           source: KubeconfigSource) -> None:
    """In the child: (None, context) when the content passes, else (type, message, limit, bound). Only
    what the loader's messages say leaves the child, never the content."""
    try:
        name = check_config(parse_content(content, source, policy), context, policy, source)
        outcome: tuple[str | None, str, str | None, int | None] = (None, name, None, None)
    except KubeconfigBeyondLimit as exc:
        outcome = (exc.type, exc.message, exc.limit, exc.bound)
    except KubeError as exc:
        outcome = (exc.type, exc.message, None, None)
    except Exception as exc:  # noqa: BLE001 - a cost or case the loader missed is still the content's
        outcome = ("KubeconfigInvalid", f"{describe(source)} could not be checked ({type(exc).__name__})", None, None)
    answer.send(outcome)
    answer.close()

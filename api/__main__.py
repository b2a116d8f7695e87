"""`python -m api`: serve the API with uvicorn (one process; the API needs only a Temporal client)."""

import os
import socket
import sys

import uvicorn

from wingsmith.adapters.temporal import check_before_start
from wingsmith.domain.config import get_settings

settings = get_settings()
check_before_start(settings, "wingsmith api", fatal_when_unreachable=False)
_standby = os.environ.get("WINGSMITH_API_STANDBY_FD")
if _standby:
    # A warm spare of `wingsmith up`: the slow part (imports, the app) is done before it is needed, then
    # it waits until `up` promotes it (one byte) or goes away (end of file).
    import api.main  # noqa: F401
    print("api: a warm spare, ready to take over", file=sys.stderr, flush=True)
    if not os.read(int(_standby), 1):
        raise SystemExit(0)
_config = uvicorn.Config("api.main:app", host=settings.api_host, port=settings.api_port, log_level="warning",
                         proxy_headers=True)
# `wingsmith up` holds the listening socket and hands it down, so while a restarted API starts,
# callers wait in the socket's queue instead of being refused (wingsmith/local/child.py).
_held = os.environ.get("WINGSMITH_API_LISTEN_FD")
uvicorn.Server(_config).run(sockets=[socket.socket(fileno=int(_held))] if _held else None)

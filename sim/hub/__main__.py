"""`python -m sim.hub --port N`: serve the offline Hub until interrupted."""

from __future__ import annotations

import argparse
import os
import signal
import threading

from sim.hub.server import start_hub_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.hub", description="Offline Hugging Face Hub snapshot server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--snapshot", default=None, help="snapshot JSON (default: the shipped one)")
    parser.add_argument("--home", default=None, help="keep the commits made here in HOME/commits.json, "
                                                     "and replay those kept there (default: in memory only)")
    parser.add_argument("--grant-token-env", default=None, metavar="VAR",
                        help="env var holding a token that may read every gated repo")
    args = parser.parse_args(argv)
    grants = {}
    if args.grant_token_env and os.environ.get(args.grant_token_env):
        grants["*"] = {os.environ[args.grant_token_env]}
    handle = start_hub_server(args.port, args.snapshot, host=args.host, grants=grants, home=args.home)
    print(f"offline Hub serving {len(handle.state.models)} models at {handle.url}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    handle.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m gateway --port 8080`: serve the local gateway until interrupted."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

from gateway.app import create_gateway_app
from gateway.bounds import (
    BODY_TIMEOUT_ENV,
    HEAD_TIMEOUT_ENV,
    KEEP_ALIVE_ENV,
    MAX_CONNECTIONS_ENV,
    MAX_HELD_ENV,
    PER_CLIENT_ENV,
    Bounds,
)
from gateway.guard import CLIENT_KEYS_ENV, DEFAULT_MAX_BODY_BYTES, MAX_BODY_ENV
from gateway.scheduling import DEFAULT_SLICE_US, SLICE_ENV, ask_for_slice, slice_us
from gateway.serving import gateway_server, listening_socket
from wingsmith.adapters.gateway.routes_sync import DEFAULT_INTERVAL, INTERVAL_ENV, SOURCE_ENV, RoutesSync, attach
from wingsmith.adapters.logs import configure_logging
from wingsmith.adapters.tracing import configure_tracing, disabled, exporting

TOKEN_REF_ENV = "WINGSMITH_GATEWAY_ADMIN_TOKEN_REF"


__all__ = ["listening_socket", "main"]


def _slice_us(text: str) -> int:
    try:
        return slice_us(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--state-dir", type=Path, default=Path(".wingsmith/gateway"),
                        help="where the routes are saved so a restart keeps them")
    parser.add_argument("--admin-token-ref", default=os.environ.get(TOKEN_REF_ENV),
                        help="env var name or file:<path> holding the admin bearer token "
                             f"(default: ${TOKEN_REF_ENV}); never the token itself")
    parser.add_argument("--probe-interval", type=float, default=1.0,
                        help="seconds between probes of a backend that is cooling down")
    parser.add_argument("--max-body-bytes", type=int,
                        default=int(os.environ.get(MAX_BODY_ENV) or DEFAULT_MAX_BODY_BYTES),
                        help=f"largest request body accepted; a larger one gets a 413 "
                             f"(default: ${MAX_BODY_ENV} or 10 MB)")
    parser.add_argument("--client-keys-ref", default=os.environ.get(CLIENT_KEYS_ENV),
                        help="env var name or file:<path> of the JSON of model name → SHA-256 digests of its "
                             f"client API keys (default: ${CLIENT_KEYS_ENV}); unset: endpoints are open")
    parser.add_argument("--routes-source", default=os.environ.get(SOURCE_ENV),
                        help="the API's base URL: pull the routes it published every --routes-poll-interval "
                             f"seconds, besides taking pushes (default: ${SOURCE_ENV}); unset: pushes only")
    parser.add_argument("--routes-poll-interval", type=float,
                        default=float(os.environ.get(INTERVAL_ENV) or DEFAULT_INTERVAL),
                        help=f"seconds between pulls (default: ${INTERVAL_ENV} or {DEFAULT_INTERVAL:g})")
    parser.add_argument("--sched-slice-us", type=_slice_us, default=os.environ.get(SLICE_ENV) or DEFAULT_SLICE_US,
                        help="the scheduler time slice the gateway asks Linux for, in microseconds: short, so "
                             "it runs soon after it wakes on a busy machine (gateway/scheduling.py); "
                             f"0 keeps the kernel's (default: ${SLICE_ENV} or {DEFAULT_SLICE_US})")
    env = Bounds.from_env()
    parser.add_argument("--head-timeout", type=float, default=env.head_timeout,
                        help="seconds a request's head may take to arrive, from its first byte or a new "
                             f"connection (default: ${HEAD_TIMEOUT_ENV} or {env.head_timeout:g}); then 408")
    parser.add_argument("--body-timeout", type=float, default=env.body_timeout,
                        help="seconds a request's body may take to arrive after its head (default: "
                             f"${BODY_TIMEOUT_ENV} or {env.body_timeout:g}); then 408")
    parser.add_argument("--max-held-bytes", type=int, default=env.max_held_bytes,
                        help="request body bytes held across all connections at once; past it 503 "
                             f"(default: ${MAX_HELD_ENV} or {env.max_held_bytes})")
    parser.add_argument("--max-connections-per-client", type=int, default=env.max_connections_per_client,
                        help="open connections from one client address; more are closed as they are "
                             f"accepted, 0: no cap (default: ${PER_CLIENT_ENV} or {env.max_connections_per_client})")
    parser.add_argument("--max-connections", type=int, default=env.max_connections,
                        help="open connections and requests in flight; past it requests get 503 "
                             f"(default: ${MAX_CONNECTIONS_ENV} or {env.max_connections})")
    parser.add_argument("--keep-alive-timeout", type=float, default=env.keep_alive_timeout,
                        help="seconds an idle kept-alive connection stays open (default: "
                             f"${KEEP_ALIVE_ENV} or {env.keep_alive_timeout:g})")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    try:
        bounds = Bounds(head_timeout=args.head_timeout, body_timeout=args.body_timeout,
                        max_held_bytes=args.max_held_bytes, max_connections_per_client=args.max_connections_per_client,
                        max_connections=args.max_connections, keep_alive_timeout=args.keep_alive_timeout)
    except ValueError as exc:
        parser.error(str(exc))
    configure_logging(args.log_level)
    if args.sched_slice_us and not ask_for_slice(args.sched_slice_us):
        print("note: the scheduler refused a shorter time slice; the gateway runs on the default one",
              file=sys.stderr)
    if not args.admin_token_ref:
        print("warning: no --admin-token-ref: the admin API refuses every call", file=sys.stderr)
    # Traced only when the spans leave the process: unlike the plane's other processes, the gateway's
    # hot path pays for every span it records, and nothing here reads spans in-process.
    tracer_provider = configure_tracing("wingsmith-gateway") if exporting() and not disabled() else None
    app = create_gateway_app(state_dir=args.state_dir, admin_token_ref=args.admin_token_ref,
                             probe_interval=args.probe_interval, max_body_bytes=args.max_body_bytes,
                             client_keys_ref=args.client_keys_ref, tracer_provider=tracer_provider,
                             bounds=bounds)
    if args.routes_source:
        attach(app, RoutesSync(app.state.table, args.routes_source, args.admin_token_ref,
                               interval=args.routes_poll_interval, on_change=app.state.forget_unrouted))
    # What start-up made lives as long as the process: out of the collector's sight, a full collection
    # (which otherwise walks every module and class, milliseconds) no longer lands on a request.
    gc.freeze()
    # uvicorn with httptools on uvloop, its head bounded (gateway/serving.py says what it serves).
    gateway_server(app, bounds, log_level=args.log_level.lower()).run(sockets=[listening_socket(args.host, args.port)])
    return 0


if __name__ == "__main__":
    sys.exit(main())

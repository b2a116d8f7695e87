"""`wingsmith up`: the whole plane on this machine; wingsmith/local/supervisor.py starts its parts and tends them
until it is asked to stop."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("up", help="run the whole plane locally (Postgres, Temporal, worker, API)")
    p.add_argument("--offline-hub", action="store_true",
                   help="serve Hugging Face metadata from the bundled snapshot server")
    p.add_argument("--no-simulated-clusters", action="store_true",
                   help="do not start the three simulated clusters (sim-east, sim-west, sim-nvl)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from wingsmith.adapters.temporal import check_before_start
    from wingsmith.domain.config import get_settings
    from wingsmith.local.supervisor import run_up
    # An external Temporal that refuses this plane's certificate, or does not answer, fails `up` in one
    # line before anything starts; `up` starts its own only when none is configured.
    check_before_start(get_settings(), "wingsmith up", fatal_when_unreachable=True)
    return run_up(offline_hub=args.offline_hub, simulated_clusters=not args.no_simulated_clusters)

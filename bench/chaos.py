"""The chaos run at full size: 30 workloads (and an endpoint per three) across the three simulated
clusters while the worker is SIGKILLed and restarted at random, the clusters answer 500s, 409s and
latency, the Hub answers 429s during registration, and Postgres is restarted once mid-run; six of
the workloads are scaled to 2 replicas and back while the faults go on, and one more workload
that cannot be placed must fail with its cause. Then
every invariant is checked and everything is deleted (see tests/chaos/harness.py).

    .venv/bin/python bench/chaos.py [--workloads 30] [--seed N] [--keep DIR]

Prints what happened and what was lost; exits 1 when anything was lost.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the harness lives with the tests
from tests.chaos.harness import ChaosConfig, run_chaos  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=30)
    parser.add_argument("--seed", type=int, default=ChaosConfig().seed)
    parser.add_argument("--root", type=Path, default=None, help="where logs and state go (default: a temp dir)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    report = run_chaos(ChaosConfig(workloads=args.workloads, seed=args.seed, root=args.root,
                                   verbose=not args.quiet))
    print("\n".join(report.lines()), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # see PITFALLS: the Temporal client can abort at interpreter exit

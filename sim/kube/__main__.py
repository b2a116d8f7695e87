"""`python -m sim.kube --home DIR`: serve the default simulated clusters until interrupted.

Prints one JSON line with the kubeconfig path, the admin URL and each cluster's frontend base URL
(the same content as DIR/clusters.json), then keeps serving until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from sim.kube.clusters import SimulatedClusters, default_cluster_specs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.kube", description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="directory for the kubeconfig and clusters.json")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="where to write the kubeconfig "
                                                                          "(default: HOME/kubeconfig)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="frontends and admin (HTTP); 0 picks a free port")
    parser.add_argument("--api-port", type=int, default=0, help="the Kubernetes API (HTTPS, the kubeconfig's "
                                                                 "server); 0 picks a free port")
    parser.add_argument("--operator-delay", type=float, default=3.0,
                        help="seconds from a new DGD generation to `successful`")
    args = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with SimulatedClusters(default_cluster_specs(), home=args.home, operator_delay=args.operator_delay,
                           host=args.host, port=args.port, kubeconfig_path=args.kubeconfig,
                           api_port=args.api_port) as sim:
        print(json.dumps(json.loads((sim.home / "clusters.json").read_text())), flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

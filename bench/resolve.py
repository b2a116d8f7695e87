"""Resolve latency against the offline Hub, through the real huggingface_hub client.

    python bench/resolve.py [--rounds N] [--cached N]

cold: a fresh resolver and an empty Hub cache per resolve (model info + config download);
cached: the same resolver again (no Hub call); api-cached: the same through GET /v1/artifacts/resolve."""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path

from stats import pct  # bench/stats.py (scripts run with bench/ on the path)

from sim.hub import shipped_models, start_hub_server
from wingsmith.adapters.hub.resolver import Resolver


def report(name: str, samples: list[float]) -> None:
    ms = [s * 1000 for s in samples]
    print(f"{name:<11} n={len(ms):<5} p50={pct(ms, 50):8.3f} ms  p99={pct(ms, 99):8.3f} ms  "
          f"mean={statistics.fmean(ms):8.3f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="cold resolves per shipped model")
    parser.add_argument("--cached", type=int, default=2000, help="cached resolves")
    args = parser.parse_args()
    from wingsmith.adapters.logs import configure_logging
    configure_logging("ERROR", "json")
    logging.disable(logging.CRITICAL)
    models = shipped_models()
    grant = "bench-token"
    import os
    os.environ["WINGSMITH_BENCH_HF_TOKEN"] = grant
    with start_hub_server(grants={"*": {grant}}) as hub, tempfile.TemporaryDirectory() as tmp:
        cold = []
        for i in range(args.rounds):
            for repo in models:
                r = Resolver(hub.url, "WINGSMITH_BENCH_HF_TOKEN", Path(tmp) / f"cold-{i}-{repo.replace('/', '--')}")
                t = time.perf_counter()
                r.resolve(f"hf:{repo}")
                cold.append(time.perf_counter() - t)
        warm = Resolver(hub.url, "WINGSMITH_BENCH_HF_TOKEN", Path(tmp) / "warm")
        for repo in models:
            warm.resolve(repo)
        calls = hub.request_count()
        cached = []
        for i in range(args.cached):
            t = time.perf_counter()
            warm.resolve(f"hf:{models[i % len(models)]}")
            cached.append(time.perf_counter() - t)
        assert hub.request_count() == calls, "a cached resolve called the Hub"

        from fastapi.testclient import TestClient

        from api.app import create_app
        from api.auth import TokenTable
        from wingsmith.domain.config import Settings
        app = create_app(Settings(hf_endpoint=hub.url, hf_token_ref="WINGSMITH_BENCH_HF_TOKEN", home=Path(tmp) / "api"),
                         tokens=TokenTable.from_json(json.dumps({"t": {"name": "bench", "roles": ["viewer"]}})))
        api = []
        with TestClient(app) as client:
            headers = {"Authorization": "Bearer t"}
            for repo in models:
                client.get("/v1/artifacts/resolve", params={"source": repo}, headers=headers).raise_for_status()
            for i in range(min(args.cached, 500)):
                t = time.perf_counter()
                client.get("/v1/artifacts/resolve", params={"source": models[i % len(models)]},
                           headers=headers).raise_for_status()
                api.append(time.perf_counter() - t)
    print(f"resolve latency, {len(models)} shipped models, offline Hub at loopback")
    report("cold", cold)
    report("cached", cached)
    report("api-cached", api)
    verdict = "OK" if pct([s * 1000 for s in cached], 99) < 20 else "TOO SLOW"
    print(f"cached p99 < 20 ms: {verdict}")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The autoscaler under a traffic ramp (issue 53): 1× → 10× → 1× through the gateway, across two clusters.

    .venv/bin/python bench/autoscale.py [--minutes 10] [--base-rps 2] [--operator-delay 3] [--seed 7]

Runs the real pieces as separate processes (bench/load.py's plane plus the gateway): PostgreSQL, the Temporal
dev server, the simulated clusters, the API (which samples the gateway's counters), the worker and the
gateway; the offline Hub in this process. Every simulated frontend of sim-east and sim-west runs a load
profile set over the sim's admin route (sim/kube/README.md, "The load model"), so a replica has a few slots and
a queue, and the time to first token grows once it saturates. An approved gpt-oss-20b is deployed on H200 at
its policy's min_replicas, with an endpoint; then an open-loop (Poisson) stream of streamed chats goes
through the gateway at `--base-rps` for the first tenth of the run, climbs to 10× by 45 %, stays there to 55 %,
comes back down by 90 % and stays at 1× to the end.

Printed, beside what an oracle that knows the ramp would do:
- the share of requests whose first token came within the policy's TTFT target (a failed request is not);
- the time from the ramp's start to the first added replica serving (ready, as the frontend counts them);
- GPU-hours held (the replicas the workload asks for, times its GPUs) against the oracle's: at each second the
  fewest replicas that hold the TTFT target at p95 for that second's rate, on the sim's own load model (`Oracle`:
  Poisson arrivals simulated in steady state), never below min_replicas; and, as a floor no policy holding a
  target reaches, against replicas at the profile's saturated throughput (there a replica's line grows without
  bound);
- flaps: a scale out followed by a scale in within the cooldown, or in then out; and every direction change;
- failed requests from the first scale-in to the end (and over the whole run);
- each scale the autoscaler recorded, and the run in tenths (rate, replicas asked, ready and the oracle's,
  TTFT p95).
The figures are printed, never judged here (issue 53's goals: ≥ 95 % within target, ≤ 1.25× the oracle's
GPU-hours, no flap, no failed request during scale-in). Every server started is stopped, even on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx
import yaml

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

from load import OPERATOR, Plane, approve, new_draft, start_plane, stop_plane  # noqa: E402
from stats import pct  # noqa: E402

from sim.kube.load_model import Arrival, LoadProfile, percentile, simulate  # noqa: E402

MODEL, ENDPOINT, WORKLOAD = "openai/gpt-oss-20b", "bench-autoscale", "bench-autoscale"
CLUSTERS = ("sim-east", "sim-west")
# The simulated engine (sim/kube/load_model.py): 4 slots a replica, decode slowing from 30 to 60 ms a token as
# they fill, a 200-token prompt prefilled in 40-80 ms, 16 tokens out: a replica serves about 3.8 requests a
# second saturated, then its line grows and with it the time to first token.
PROFILE = {"ttft_ms_at_1k_isl": 200, "tpot_ms_at_batch_1": 30, "tpot_ms_at_max_batch": 60, "max_num_seqs": 4}
PROMPT_TOKENS, OUTPUT_TOKENS = 200, 16
TTFT_TARGET_MS = 500
PEAK = 10.0
POLL_SECONDS = 1.0


def saturated_capacity(profile: dict, isl: int, osl: int) -> float:
    """Requests per second one replica serves with every slot busy (the load model's arithmetic)."""
    slots = profile["max_num_seqs"]
    step = profile["tpot_ms_at_max_batch"]
    prefill = max(step, profile["ttft_ms_at_1k_isl"] * isl / 1000 * step / profile["tpot_ms_at_batch_1"])
    return slots / ((prefill + osl * step) / 1000)


@dataclass(frozen=True)
class Ramp:
    seconds: float
    base: float
    peak: float = PEAK

    @property
    def starts(self) -> float:
        return 0.1 * self.seconds

    def rate(self, t: float) -> float:
        f = t / self.seconds
        if f < 0.1 or f >= 0.9:
            factor = 1.0
        elif f < 0.45:
            factor = 1 + (self.peak - 1) * (f - 0.1) / 0.35
        elif f < 0.55:
            factor = self.peak
        else:
            factor = self.peak - (self.peak - 1) * (f - 0.55) / 0.35
        return self.base * factor


@dataclass
class Request:
    start: float  # seconds from the run's start
    ttft_ms: float | None = None
    ok: bool = False
    why: str = ""


@dataclass
class Observed:
    """What the poller saw each second: (t, replicas asked, replicas ready); and the most replicas each cluster
    was asked for at once."""
    points: list[tuple[float, int, int]] = field(default_factory=list)
    most_by_cluster: dict[str, int] = field(default_factory=dict)


def policy(capacity: float, args: argparse.Namespace) -> dict:
    return {"min_replicas": args.min_replicas, "max_replicas": args.max_replicas, "ttft_p95_ms": TTFT_TARGET_MS,
            "requests_per_second_per_replica": round(capacity * args.capacity_share, 2),
            "scale_up_window_s": 30, "scale_down_window_s": args.scale_down_window, "cooldown_s": 45}


def admin_tokens(plane: Plane) -> dict[str, str]:
    """Each simulated cluster's bearer token (its admin routes take it), from the kubeconfig the sim wrote."""
    config = yaml.safe_load((plane.root / "home" / "kubeconfigs" / "sim.yaml").read_text())
    users = {u["name"]: u["user"]["token"] for u in config["users"]}
    return {c["name"]: users[c["context"]["user"]] for c in config["contexts"]}


async def set_profiles(plane: Plane) -> None:
    described = json.loads((plane.root / "sim" / "clusters.json").read_text())
    tokens = admin_tokens(plane)
    async with httpx.AsyncClient(timeout=10, trust_env=False) as sim:
        for name in CLUSTERS:
            r = await sim.patch(f"{described['admin_url']}/{name}/load", json={"default": PROFILE},
                                headers={"Authorization": f"Bearer {tokens[name]}"})
            r.raise_for_status()


async def until(what: str, check, within: float = 300, every: float = 0.5):
    give_up = time.monotonic() + within
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > give_up:
            raise RuntimeError(f"{what}: not within {within:.0f} s")
        await asyncio.sleep(every)


async def deploy(plane: Plane, http: httpx.AsyncClient, capacity: float, args: argparse.Namespace) -> int:
    """The workload (at the policy's floor) and its endpoint, serving; returns the GPUs per replica."""
    artifact = await new_draft(plane, http, MODEL)
    await approve(plane, http, artifact)
    body = {"artifact_id": artifact, "name": WORKLOAD, "hardware": "h200", "layout": "single_node_tp",
            "replicas": args.min_replicas, "constraints": {"allowed_clusters": list(CLUSTERS)},
            "autoscaling": policy(capacity, args)}
    for gpus in (1, 2, 4, 8):  # the fewest GPUs the model fits on
        r = await http.post("/v1/workloads", headers=plane.headers(OPERATOR), json={**body, "gpus": gpus})
        if r.status_code == 202:
            break
    else:
        raise RuntimeError(f"the workload was refused: {r.status_code} {r.text}")

    async def serving():
        got = (await http.get(f"/v1/workloads/{WORKLOAD}", headers=plane.headers(OPERATOR))).json()
        stage = (got.get("live") or {}).get("stage") or got.get("state")
        if stage in ("failed", "deleted"):
            raise RuntimeError(f"{WORKLOAD}: {stage}")
        return stage == "serving"
    await until("the workload serving", serving)
    r = await http.post("/v1/endpoints", headers=plane.headers(OPERATOR),
                        json={"name": ENDPOINT, "workloads": [WORKLOAD]})
    if r.status_code not in (200, 201, 202):
        raise RuntimeError(f"the endpoint was refused: {r.status_code} {r.text}")

    async def published():
        return (await http.get(f"/v1/endpoints/{ENDPOINT}", headers=plane.headers(OPERATOR))).json().get("published")
    await until("the endpoint published", published)
    return gpus


async def chat(gateway: httpx.AsyncClient, req: Request, prompt: str) -> None:
    body = {"model": ENDPOINT, "stream": True, "max_tokens": OUTPUT_TOKENS,
            "messages": [{"role": "user", "content": prompt}]}
    sent = time.monotonic()
    try:
        async with gateway.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                req.why = f"HTTP {r.status_code}"
                await r.aread()
                return
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    req.why = f"stream error: {chunk['error']}"[:120]
                    return
                if req.ttft_ms is None and any((c.get("delta") or {}).get("content") for c in chunk.get("choices", [])):
                    req.ttft_ms = (time.monotonic() - sent) * 1000
        req.ok = req.ttft_ms is not None
        req.why = "" if req.ok else "no token"
    except (httpx.HTTPError, json.JSONDecodeError) as err:
        req.why = type(err).__name__


async def drive(plane: Plane, ramp: Ramp, seed: int, t0: float) -> list[Request]:
    """Open-loop arrivals at the ramp's rate (each request on its own, whatever the others' latency)."""
    rng = random.Random(seed)
    prompt = ("word " * (PROMPT_TOKENS * 4 // 5))[:PROMPT_TOKENS * 4]  # ≈ 4 characters a token
    requests: list[Request] = []
    tasks: set[asyncio.Task] = set()
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=plane.gateway_url or "", timeout=120, limits=limits,
                                 trust_env=False) as gateway:
        t = 0.0
        while True:
            t += rng.expovariate(max(ramp.rate(t), 1e-6))
            if t >= ramp.seconds:
                break
            await asyncio.sleep(max(0.0, t0 + t - time.monotonic()))
            req = Request(start=t)
            requests.append(req)
            task = asyncio.create_task(chat(gateway, req, prompt))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.wait(tasks, timeout=120)
    return requests


async def watch(plane: Plane, http: httpx.AsyncClient, t0: float, stop: asyncio.Event, seen: Observed) -> None:
    """Each second: the replicas the workload asks for, and the replicas its frontends count ready."""
    async with httpx.AsyncClient(timeout=5, trust_env=False) as frontends:
        while not stop.is_set():
            t = time.monotonic() - t0
            try:
                got = (await http.get(f"/v1/workloads/{WORKLOAD}", headers=plane.headers(OPERATOR))).json()
                clusters = [c for c in (got.get("live") or {}).get("clusters", []) if c.get("state") != "deleted"]
                asked = sum(int(c.get("replicas") or 0) for c in clusters)
                ready = 0
                for c in clusters:
                    if c.get("frontend_url"):
                        load = await frontends.get(c["frontend_url"].rstrip("/") + "/sim/load")
                        ready += int(load.json().get("replicas") or 0) if load.status_code == 200 else 0
                seen.points.append((t, asked, ready))
                for c in clusters:
                    name, count = str(c.get("cluster") or c.get("name")), int(c.get("replicas") or 0)
                    seen.most_by_cluster[name] = max(count, seen.most_by_cluster.get(name, 0))
            except (httpx.HTTPError, ValueError):
                pass  # a second missed; the integral takes the neighbours
            try:
                await asyncio.wait_for(stop.wait(), POLL_SECONDS)
            except TimeoutError:
                pass


def gpu_hours(points: list[tuple[float, float]], end: float, gpus: int) -> float:
    """∫ replicas × gpus dt over [0, end], each reading held until the next."""
    total = 0.0
    for (t, replicas), (nxt, _) in zip(points, [*points[1:], (end, 0)], strict=True):
        total += replicas * max(0.0, min(nxt, end) - t)
    return total * gpus / 3600


def saturated_replicas(ramp: Ramp, t: float, capacity: float, floor: int) -> int:
    """The floor: replicas that serve the second's rate with every slot busy (no latency target holds there)."""
    return max(floor, math.ceil(round(ramp.rate(t) / capacity, 9)))


class Oracle:
    """The fewest replicas that hold a TTFT target at p95 for a steady rate: the load model the simulated frontends
    run (sim/kube/load_model.py) fed `seconds` of Poisson arrivals of the bench's requests, for rates in steps of
    `step` (rounded up), found once per step in ascending order (more traffic never needs fewer replicas)."""

    def __init__(self, profile: dict, target_ms: float, floor: int, *, seconds: float = 600, step: float = 0.25,
                 seed: int = 0) -> None:
        self.profile, self.target_ms, self.floor = LoadProfile.model_validate(profile), target_ms, floor
        self.seconds, self.step, self.seed = seconds, step, seed
        self.found: list[int] = []  # replicas for rate steps 1, 2, ... (a rate of k × step)

    def holds(self, rate: float, replicas: int) -> bool:
        rng, t, arrivals = random.Random(f"{self.seed}/{float(rate)!r}/{replicas}"), 0.0, []
        while True:
            t += rng.expovariate(rate) * 1000
            if t >= self.seconds * 1000:
                break
            arrivals.append(Arrival(t, PROMPT_TOKENS, OUTPUT_TOKENS))
        if not arrivals:
            return True
        p95 = percentile([o.ttft_ms for o in simulate(self.profile, arrivals, replicas=replicas)], 95)
        return p95 is not None and p95 <= self.target_ms

    def replicas(self, rate: float) -> int:
        k = math.ceil(round(rate / self.step, 9))
        while len(self.found) < k:
            n = self.found[-1] if self.found else self.floor
            while not self.holds((len(self.found) + 1) * self.step, n):
                n += 1
            self.found.append(n)
        return self.found[k - 1] if k > 0 else self.floor


def scales_of(decisions: list[dict], t0_wall: float) -> list[tuple[float, dict]]:
    done = [d for d in decisions if d["outcome"] == "scaled" and d["action"] != "hold"]
    return sorted(((datetime.fromisoformat(d["at"]).timestamp() - t0_wall, d) for d in done), key=lambda x: x[0])


def flaps(scales: list[tuple[float, dict]], cooldown: float) -> tuple[int, int]:
    """(reversals within the cooldown, every reversal)."""
    quick = every = 0
    for (t, a), (u, b) in zip(scales, scales[1:], strict=False):
        if a["action"] != b["action"]:
            every += 1
            quick += u - t < cooldown
    return quick, every


def _ms(values: list[float], q: float) -> str:
    return f"{pct(values, q):.0f} ms" if values else "—"


def report(args: argparse.Namespace, ramp: Ramp, capacity: float, pol: dict, gpus: int, requests: list[Request],
           seen: Observed, decisions: list[dict], t0_wall: float) -> tuple[dict, list[str]]:
    """The run's figures (as bench/report.py files them) and its printed lines."""
    ok = [r for r in requests if r.ok]
    within = [r for r in ok if r.ttft_ms is not None and r.ttft_ms <= TTFT_TARGET_MS]
    ttfts = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    scales = scales_of(decisions, t0_wall)
    first_in = next((t for t, d in scales if d["action"] == "scale_in"), None)
    failed_in = [r for r in requests if first_in is not None and r.start >= first_in and not r.ok]
    failed = [r for r in requests if not r.ok]
    initial = seen.points[0][2] if seen.points else 1
    added = next((t for t, _, ready in seen.points if t >= ramp.starts and ready > initial), None)
    held = gpu_hours([(t, asked) for t, asked, _ in seen.points], ramp.seconds, gpus)
    oracle = Oracle(PROFILE, TTFT_TARGET_MS, pol["min_replicas"])
    ideal = gpu_hours([(float(s), oracle.replicas(ramp.rate(s))) for s in range(int(ramp.seconds))], ramp.seconds,
                      gpus)
    floor = gpu_hours([(float(s), saturated_replicas(ramp, s, capacity, pol["min_replicas"]))
                       for s in range(int(ramp.seconds))], ramp.seconds, gpus)
    quick, every = flaps(scales, pol["cooldown_s"])
    reasons = sorted({r.why for r in failed})
    figures = {
        "autoscale_within_ttft_share": round(len(within) / max(len(requests), 1), 4),
        "autoscale_gpu_hours_vs_oracle": round(held / ideal, 3) if ideal else float("inf"),
        "autoscale": {"minutes": args.minutes, "requests": len(requests), "failed": len(failed),
                      "ttft_ms": {"p50": pct(ttfts, 50) if ttfts else None, "p95": pct(ttfts, 95) if ttfts else None},
                      "first_added_replica_ready_s": None if added is None else round(added - ramp.starts, 1),
                      "gpu_hours": {"held": round(held, 4), "oracle": round(ideal, 4),
                                    "saturated_floor": round(floor, 4)},
                      "flaps_within_cooldown": quick, "direction_changes": every,
                      "failed_from_first_scale_in": len(failed_in) if first_in is not None else None,
                      "scales": [f"{d['replicas_from']} → {d['replicas_to']} at {t:.0f} s" for t, d in scales],
                      "most_replicas_by_cluster": dict(sorted(seen.most_by_cluster.items())),
                      "policy": pol}}
    lines = [
        f"autoscale on {os.cpu_count()} cores: {args.minutes:g} min ramp 1× → {PEAK:g}× → 1× of {args.base_rps:g} "
        f"requests/s, streamed, {PROMPT_TOKENS} tokens in, {OUTPUT_TOKENS} out; operator delay "
        f"{args.operator_delay:g} s; autoscaler every {args.period:g} s, traffic sampled every 2 s",
        f"  profile {json.dumps(PROFILE)}: {capacity:.2f} requests/s per replica saturated; policy "
        f"{json.dumps(pol)}; {gpus} GPU(s) per replica",
        f"requests                 {len(requests)} ({len(failed)} failed"
        f"{': ' + ', '.join(reasons) if reasons else ''})",
        f"within TTFT {TTFT_TARGET_MS} ms         {len(within) / max(len(requests), 1):.1%}  (TTFT p50 "
        f"{_ms(ttfts, 50)}, p95 {_ms(ttfts, 95)}, p99 {_ms(ttfts, 99)})",
        "first added replica ready " + (f"{added - ramp.starts:.1f} s after the ramp began" if added is not None
                                        else "never"),
        f"GPU-hours                {held:.3f} held, oracle {ideal:.3f}: {held / ideal if ideal else float('nan'):.2f}× "
        f"(the oracle: the fewest replicas holding TTFT p95 ≤ {TTFT_TARGET_MS} ms at each second's rate, on the load "
        f"model); the floor at saturated throughput {floor:.3f}: {held / floor if floor else float('nan'):.2f}×",
        f"flaps                    {quick} reversal(s) within the cooldown ({pol['cooldown_s']} s); {every} direction "
        "change(s) in all",
        "failed during scale-in   " + (f"{len(failed_in)} of {sum(r.start >= first_in for r in requests)} requests "
                                       f"from the first scale-in (at {first_in:.0f} s) to the end"
                                       if first_in is not None else "no scale-in happened"),
        "most replicas at once   " + (", ".join(f"{c} {n}" for c, n in sorted(seen.most_by_cluster.items()))
                                       or "—"),
        "scales (s from the start, the autoscaler's words):"]
    lines += [f"  {t:7.1f}  {d['action'].replace('_', ' ')} {d['replicas_from']} → {d['replicas_to']}: "
              f"{'; '.join(d.get('reasons') or [])[:110]}" for t, d in scales]
    not_done = [d for d in decisions if d["action"] != "hold" and d["outcome"] != "scaled"]
    if not_done:
        lines.append(f"  (and {len(not_done)} scale(s) not done: "
                     f"{', '.join(sorted({d['outcome'] for d in not_done}))})")
    lines.append("the run in tenths: rate/s  asked  ready  oracle  TTFT p95 ms  failed")
    for k in range(10):
        lo, hi = ramp.seconds * k / 10, ramp.seconds * (k + 1) / 10
        inside = [r for r in requests if lo <= r.start < hi]
        tt = [r.ttft_ms for r in inside if r.ok and r.ttft_ms is not None]
        pts = [p for p in seen.points if lo <= p[0] < hi]
        asked = max((p[1] for p in pts), default=0)
        ready = max((p[2] for p in pts), default=0)
        need = max(oracle.replicas(ramp.rate(s)) for s in range(int(lo), max(int(hi), int(lo) + 1)))
        lines.append(f"  {k * 10:3d}–{(k + 1) * 10:3d} %  {len(inside) / (hi - lo):6.1f}  {asked:5d}  {ready:5d}  "
                     f"{need:6d}  {_ms(tt, 95):>11}  {sum(not r.ok for r in inside):6d}")
    return figures, lines


async def run(args: argparse.Namespace, plane: Plane) -> tuple[dict, list[str]]:
    capacity = saturated_capacity(PROFILE, PROMPT_TOKENS, OUTPUT_TOKENS)
    ramp = Ramp(seconds=args.minutes * 60, base=args.base_rps)
    pol = policy(capacity, args)
    async with httpx.AsyncClient(base_url=plane.api_url, timeout=30, trust_env=False) as http:
        await set_profiles(plane)
        gpus = await deploy(plane, http, capacity, args)
        print(f"serving: {WORKLOAD} behind {ENDPOINT} at {plane.gateway_url}; the ramp begins", file=sys.stderr,
              flush=True)
        stop, seen = asyncio.Event(), Observed()
        t0, t0_wall = time.monotonic(), time.time()
        watcher = asyncio.create_task(watch(plane, http, t0, stop, seen))
        try:
            requests = await drive(plane, ramp, args.seed, t0)
        finally:
            stop.set()
            await watcher
        got = await http.get(f"/v1/workloads/{WORKLOAD}/autoscaling", params={"limit": 500},
                             headers=plane.headers(OPERATOR))
        got.raise_for_status()
        decisions = got.json()["decisions"]
    return report(args, ramp, capacity, pol, gpus, requests, seen, decisions, t0_wall)


def measure(argv: list[str] | None = None) -> tuple[dict, list[str]]:
    """One run on a plane of its own (stopped at the end, even on failure): its figures and printed lines."""
    args = parse(argv)
    root = Path(tempfile.mkdtemp(prefix="wingsmith-autoscale-"))
    # The bench's one address stands in for many clients: the gateway's cap per client address (256) would
    # refuse it where the same traffic from many clients passes.
    plane = start_plane(root, with_gateway=True, operator_delay=args.operator_delay,
                        gateway_args=("--max-connections-per-client", "4096"), extra_env={
                            "WINGSMITH_TRAFFIC_SAMPLE_SECONDS": "2",
                            "WINGSMITH_AUTOSCALER_PERIOD_SECONDS": str(args.period)})
    try:
        figures, lines = asyncio.run(run(args, plane))
    finally:
        stop_plane(plane)
    return figures, [*lines, f"(logs under {root})"]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="the whole run: 1×, the ramp, 1× again")
    parser.add_argument("--base-rps", type=float, default=2.0, help="1×: requests per second before the ramp")
    parser.add_argument("--min-replicas", type=int, default=2,
                        help="the policy's floor (the oracle's too): one capacity per replica holds only where "
                             "replicas share the line; a lone replica of the profile holds TTFT p95 500 ms only "
                             "to about 2.2 requests/s, two or more to 2.9-3.5 each (the policy says 3.08)")
    parser.add_argument("--max-replicas", type=int, default=10)
    parser.add_argument("--capacity-share", type=float, default=0.8,
                        help="the policy's requests per second per replica, as a share of the saturated figure")
    parser.add_argument("--scale-down-window", type=int, default=60,
                        help="the policy's scale_down_window_s: the ramp comes down over 35 %% of the run (210 s "
                             "of 10 minutes), so a window of minutes, right for a day's traffic, would not see it")
    parser.add_argument("--period", type=float, default=5.0, help="WINGSMITH_AUTOSCALER_PERIOD_SECONDS")
    parser.add_argument("--operator-delay", type=float, default=3.0,
                        help="seconds the simulated operator takes to make a new replica ready")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.base_rps <= 0:
        parser.error("--minutes and --base-rps must be positive")
    return args


def main() -> int:
    _, lines = measure()
    for text in lines:
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # as bench/chaos.py: the Temporal client can abort at interpreter exit

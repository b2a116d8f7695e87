"""The simulated engine behind one deployment's frontend: the load model (`load_model.py`) driven by
the real clock, and what it measured, for the frontend's `/metrics` and `/sim/load`.

A request arrives (`Engine.request`), waits for a slot in the FIFO line, sleeps its prefill, then
produces its tokens at the pace of its replica's current batch (`Run.first_token`, `Run.token`), and
leaves (`Run.close`, also when its client went away), which lets the line's head in. Sleeps go to
absolute deadlines, so a late wake-up of the event loop is not added up token after token. An
instantaneous profile (the default) never sleeps and never yields the loop: a frontend without a
profile answers exactly as fast as before.

Requests run on the simulated clusters' event loop; the scheduler is also reconfigured from the
operator's pass and from a test's thread, so its state is guarded by a lock and a waiting request
is woken through its loop (`call_soon_threadsafe`).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from sim.kube.load_model import Admission, LoadProfile, Scheduler, percentile, prefill_ms, step_ms

# A decode owing less time than this goes on without a sleep; the replica's batch is read again at
# each sleep, so a batch that changes is felt within this much time.
_GRANULARITY = 0.002
_KEEP = 4096  # observations kept for the percentiles
_TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


@dataclass(frozen=True)
class EngineConfig:
    """What an engine runs by: its profile (and where it came from), its replicas and their slots."""

    profile: LoadProfile
    source: str  # "default", "cluster", "annotation" or "admin"
    replicas: int
    slots: int
    error: str | None = None  # why the deployment's annotation was not used, if it was not


class _Series:
    """Recent observations for percentiles (bounded) and a Prometheus histogram of all of them."""

    def __init__(self, buckets: tuple[float, ...]):
        self.bounds = buckets
        self.recent: deque[tuple[float, float]] = deque(maxlen=_KEEP)  # (monotonic time, seconds)
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, seconds: float, at: float) -> None:
        self.recent.append((at, seconds))
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def summary(self, since: float) -> dict[str, Any]:
        values = [v * 1000 for at, v in self.recent if at >= since]
        out: dict[str, Any] = {"count": len(values)}
        for q in (50, 90, 95, 99, 100):
            p = percentile(values, q)
            out["max" if q == 100 else f"p{q}"] = None if p is None else round(p, 3)
        return out

    def cumulative(self) -> list[tuple[str, float]]:
        running, out = 0, list[tuple[str, float]]()
        for bound, n in zip((*(str(float(b)) for b in self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


class Engine:
    """One deployment's simulated engine: lives as long as its frontend is published."""

    def __init__(self, config: EngineConfig):
        self._lock = threading.Lock()
        self.config = config
        self._scheduler = Scheduler(config.replicas, config.slots)
        self._runs: dict[Hashable, Run] = {}
        self._stopped = False
        self._ids = itertools.count()
        self.ttft = _Series(_TTFT_BUCKETS)
        self.tpot = _Series(_TPOT_BUCKETS)
        self.counts = {"completed": 0, "abandoned": 0, "queued": 0, "input_tokens": 0, "output_tokens": 0}

    def configure(self, config: EngineConfig) -> None:
        """Another profile or another number of ready replicas; the line moves into what it frees."""
        with self._lock:
            if config == self.config:
                return
            self.config = config
            self._wake(self._scheduler.resize(config.replicas, config.slots))

    def stop(self) -> None:
        """The deployment's frontend is gone: requests waiting for a slot fail (`EngineGone`), running
        ones finish."""
        with self._lock:
            self._stopped = True
            for ident in self._scheduler.waiting():
                self._runs[ident].gone()

    def request(self, input_tokens: int, output_tokens: int) -> Run:
        with self._lock:
            if self._stopped:
                raise EngineGone("the deployment's frontend stopped")
            run = Run(self, next(self._ids), input_tokens, max(output_tokens, 1))
            self._runs[run.id] = run
            admission = self._scheduler.arrive(run.id)
            if admission is None:
                self.counts["queued"] += 1
            else:
                run.admitted(admission, run.arrived)
            return run

    # ---- called by runs --------------------------------------------------------------------------

    def _wake(self, admissions: list[Admission]) -> None:
        """Give each admitted request its slot (under the lock)."""
        now = time.monotonic()
        for admission in admissions:
            run = self._runs.get(admission.request)
            if run is not None:
                run.admitted(admission, now)

    def _batch_of(self, run: Run) -> int:
        with self._lock:
            replica = self._scheduler.replica_of(run.id)
            return self._scheduler.batch(replica) if replica is not None else 1

    def _leave(self, run: Run, completed: bool) -> None:
        now = time.monotonic()
        with self._lock:
            if self._runs.pop(run.id, None) is None:
                return
            self._wake(self._scheduler.leave(run.id))
            if not completed:
                self.counts["abandoned"] += 1
                return
            self.counts["completed"] += 1
            self.counts["input_tokens"] += run.input_tokens
            self.counts["output_tokens"] += run.output_tokens
            assert run.first_at is not None and run.last_at is not None
            self.ttft.observe(run.first_at - run.arrived, now)
            if run.output_tokens > 1:
                self.tpot.observe((run.last_at - run.first_at) / (run.output_tokens - 1), now)

    # ---- what it measured ------------------------------------------------------------------------

    def report(self, window: float) -> dict[str, Any]:
        """What the engine sees now and saw over the last `window` seconds (the `/sim/load` body)."""
        since = time.monotonic() - window
        with self._lock:
            c, s = self.config, self._scheduler
            return {
                "replicas": c.replicas, "slots_per_replica": c.slots,
                "profile": c.profile.model_dump(), "profile_source": c.source, "profile_error": c.error,
                "running": s.running, "running_per_replica": s.batches(), "queued": s.queued,
                "requests_total": self.counts["completed"], "requests_queued_total": self.counts["queued"],
                "requests_abandoned_total": self.counts["abandoned"],
                "input_tokens_total": self.counts["input_tokens"], "output_tokens_total": self.counts["output_tokens"],
                "window_seconds": window, "ttft_ms": self.ttft.summary(since), "tpot_ms": self.tpot.summary(since),
            }

    def metrics(self, model: str) -> bytes:
        """The Prometheus exposition of this engine, named as Dynamo's frontend names its metrics."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_EngineCollector(self, model))
        return generate_latest(registry)


class _EngineCollector(Collector):
    def __init__(self, engine: Engine, model: str):
        self.engine, self.model = engine, model

    def collect(self) -> Iterable[Metric]:
        e, labels = self.engine, [self.model]
        with e._lock:
            running, queued = e._scheduler.running, e._scheduler.queued
            counts, config = dict(e.counts), e.config
            ttft = (e.ttft.cumulative(), e.ttft.sum)
            tpot = (e.tpot.cumulative(), e.tpot.sum)
        gauges = (("dynamo_frontend_inflight_requests", "Requests in the engine: running or waiting for a slot.",
                   running + queued),
                  ("dynamo_frontend_queued_requests", "Requests waiting for a slot.", queued),
                  ("wingsmith_sim_replicas", "Ready replicas the simulated engine spreads its load over.",
                   config.replicas),
                  ("wingsmith_sim_slots_per_replica", "Sequences one replica runs at once.", config.slots))
        for name, doc, value in gauges:
            gauge = GaugeMetricFamily(name, doc, labels=["model"])
            gauge.add_metric(labels, value)
            yield gauge
        requests = CounterMetricFamily("dynamo_frontend_requests", "Requests answered, by how they ended.",
                                       labels=["model", "status"])
        requests.add_metric([self.model, "success"], counts["completed"])
        requests.add_metric([self.model, "cancelled"], counts["abandoned"])
        yield requests
        for name, doc, key in (("dynamo_frontend_input_sequence_tokens", "Input tokens of answered requests.",
                                "input_tokens"),
                               ("dynamo_frontend_output_sequence_tokens", "Output tokens of answered requests.",
                                "output_tokens")):
            tokens = CounterMetricFamily(name, doc, labels=["model"])
            tokens.add_metric(labels, counts[key])
            yield tokens
        for name, doc, (buckets, total) in (
                ("dynamo_frontend_time_to_first_token_seconds", "From arrival (waiting included) to the first token.",
                 ttft),
                ("dynamo_frontend_inter_token_latency_seconds", "Mean time per output token after the first, "
                                                                "per request.", tpot)):
            family = HistogramMetricFamily(name, doc, labels=["model"])
            family.add_metric(labels, buckets, total)
            yield family


class EngineGone(Exception):
    """The deployment stopped serving while a request waited for a slot."""


class Run:
    """One request going through an engine."""

    def __init__(self, engine: Engine, ident: int, input_tokens: int, output_tokens: int):
        self.engine, self.id = engine, ident
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        self.arrived = time.monotonic()
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.produced = 0  # tokens out so far
        self._admission: Admission | None = None
        self._admitted_at = 0.0
        self._at = 0.0  # when the last token produced is due (monotonic)
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None
        self._gone = False
        self._closed = False

    def admitted(self, admission: Admission, at: float) -> None:
        """The scheduler gave this request a slot (called under the engine's lock, from any thread)."""
        self._admission, self._admitted_at = admission, at
        self._signal(None)

    def gone(self) -> None:
        """Its engine stopped while this request waited (under the engine's lock)."""
        self._gone = True
        self._signal(EngineGone("the deployment's frontend stopped while the request waited for a slot"))

    def _signal(self, error: Exception | None) -> None:
        if self._waiter is None:
            return
        loop, future = self._waiter

        def settle() -> None:
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

        loop.call_soon_threadsafe(settle)

    async def first_token(self) -> None:
        """Wait for a slot, then for the prefill: the first token is out when this returns."""
        with self.engine._lock:
            if self._gone:
                raise EngineGone("the deployment's frontend stopped while the request waited for a slot")
            if self._admission is None:
                loop = asyncio.get_running_loop()
                self._waiter = (loop, loop.create_future())
        if self._waiter is not None:
            await self._waiter[1]
        assert self._admission is not None
        config = self.engine.config
        cost = prefill_ms(config.profile, self.input_tokens, self._admission.batch, config.slots) / 1000
        self._at = self._admitted_at + cost
        await _until(self._at)
        self.first_at = self.last_at = time.monotonic()
        self.produced = 1

    async def token(self, index: int) -> None:
        """Decode until token `index` (0 is the first) is out, each step at its replica's current pace."""
        index = min(index, self.output_tokens - 1)
        if self.engine.config.profile.instantaneous:
            self.produced = max(self.produced, index + 1)
        while self.produced <= index:
            config = self.engine.config
            self._at += step_ms(config.profile, self.engine._batch_of(self), config.slots) / 1000
            self.produced += 1
            if self._at - time.monotonic() >= _GRANULARITY:
                await _until(self._at)
        await _until(self._at)
        self.last_at = time.monotonic()

    def close(self) -> None:
        """The request is over: completed if every token came out, else abandoned (idempotent)."""
        if not self._closed:
            self._closed = True
            self.engine._leave(self, completed=self.produced >= self.output_tokens)


async def _until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)

"""The worker's metrics: the Temporal SDK's runtime metrics and the plane's `wingsmith_*` metrics on
one scrape port (WINGSMITH_WORKER_METRICS_PORT, default 9464).

The SDK exports its metrics from Rust, on its own loopback port (`PrometheusConfig`); prometheus_client
serves the plane's registry on 9464 and, at each scrape, reads the SDK's page and re-exposes its
families (wingsmith.adapters.metrics.ScrapedMetrics). One port, two real exporters, no hand-written text.

Domain metrics are counted by an activity interceptor after an activity succeeds, from the activity's
own input: workflows stay free of side effects, a replay counts nothing, and the activities need no
edits. An activity retried after it succeeded but before Temporal heard so counts twice; that is
rare and errs towards the truth of "work done".
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from typing import Any

import asyncpg
from prometheus_client import start_http_server
from temporalio import activity
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from wingsmith.adapters import metrics
from wingsmith.adapters.logs import get_logger
from wingsmith.domain.config import Settings

log = get_logger("wingsmith.worker.metrics")


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics_runtime(settings: Settings) -> tuple[Runtime, str]:
    """A Temporal runtime exporting the SDK's metrics in Prometheus' conventions (seconds, `_total`),
    bound on loopback; returns it with the URL of its page."""
    address = f"127.0.0.1:{settings.worker_sdk_metrics_port or _free_loopback_port()}"
    runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(
        bind_address=address, counters_total_suffix=True, durations_as_seconds=True, unit_suffix=True)))
    return runtime, f"http://{address}/metrics"


def serve_metrics(settings: Settings, sdk_url: str | None) -> Any | None:
    """Serve the worker's registry (plus the SDK's families from `sdk_url`) until the process exits."""
    metrics.SDK_METRICS.url = sdk_url
    try:
        server, _thread = start_http_server(settings.worker_metrics_port, addr=settings.worker_metrics_host,
                                            registry=metrics.WORKER_REGISTRY)
    except OSError as exc:  # a busy port costs the scrape, not the work: the worker still runs
        log.error("worker metrics not served", port=settings.worker_metrics_port, error=str(exc))
        return None
    log.info("worker metrics", url=f"http://{settings.worker_metrics_host}:{settings.worker_metrics_port}/metrics")
    return server


class DomainMetrics(Interceptor):
    """Counts the plane's domain events from the activities that record them."""

    def __init__(self, db: asyncpg.Pool | None):
        self.db = db

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _CountingActivity(next, self)


class _CountingActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, root: DomainMetrics):
        super().__init__(next)
        self.root = root

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        result = await self.next.execute_activity(input)
        try:
            await count(activity.info().activity_type, input.args[0] if input.args else None, self.root.db)
        except Exception as exc:  # noqa: BLE001 - a metric must never fail the work it counts
            log.warning("could not count an activity's metrics", activity=activity.info().activity_type,
                        error=type(exc).__name__)
        return result


async def count(activity_type: str, arg: Any, db: asyncpg.Pool | None) -> None:
    """The metric (if any) one successful activity stands for; `arg` is its one pydantic input."""
    if activity_type == "save_draft" and arg.version == 1:
        metrics.ARTIFACTS_REGISTERED.inc()
    elif activity_type == "record_decision":
        saved = await _fetch(db, "select created_at from drafts where artifact_id = $1 and version = $2",
                             arg.artifact_id, arg.decision.draft_version)
        metrics.review_decided(arg.decision.decision, arg.decision.decided_at, saved)
    elif activity_type == "workload.record_heal":
        metrics.heal(arg.problem)  # what the watch repaired: DeploymentMissing, SpecEdited, ClusterUnreachable...
    elif activity_type == "workload.record_deployment":
        if arg.state == "applied":
            metrics.ROLLOUTS_STARTED.inc()
        elif arg.state == "serving":
            metrics.ROLLOUTS_SUCCEEDED.inc()
        elif arg.state == "failed":
            metrics.rollout_failed(arg.detail.get("cause"), arg.replicas)
    # `<run>:serving:<placement>` is a workload's first serving; scale-ups append the history length.
    elif activity_type == "workload.record" and arg.state == "serving" and arg.step.count(":") == 2:
        approved = await _fetch(db, "select decided_at from reviews where artifact_id = $1 and decision = 'approve'",
                                arg.artifact_id)
        if approved is not None:
            metrics.approval_to_serving(approved, datetime.now(UTC))


async def _fetch(db: asyncpg.Pool | None, query: str, *args: Any) -> Any:
    return None if db is None else await db.fetchval(query, *args)

"""The plane's own Prometheus metrics (`wingsmith_*`), counted where the work happens: in the worker's
activities (see worker/metrics.py for the hook), never in workflow code, so replay cannot count twice.

Every label has a small, fixed set of values (a decision, an error type); ids of artifacts, workloads
or requests never become labels, as Prometheus asks. The registry is the worker's own, so a test
process that also runs the API or the gateway keeps each process's families apart.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterable
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

WORKER_REGISTRY = CollectorRegistry(auto_describe=True)

# People take minutes to days to review; a plane on simulated clusters serves in seconds.
_REVIEW_BUCKETS = (1, 10, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)
_SERVING_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 86400)

ARTIFACTS_REGISTERED = Counter(
    "wingsmith_artifacts_registered", "Artifacts whose first draft was saved (registrations that got a draft).",
    registry=WORKER_REGISTRY)
ARTIFACTS_DECIDED = Counter(
    "wingsmith_artifacts_decided", "Review decisions recorded, by decision (approved, rejected, expired).",
    ["decision"], registry=WORKER_REGISTRY)
REVIEW_WAIT = Histogram(
    "wingsmith_review_wait_seconds", "From a draft being saved to its review decision.",
    ["decision"], buckets=_REVIEW_BUCKETS, registry=WORKER_REGISTRY)
ROLLOUTS_STARTED = Counter(
    "wingsmith_rollouts_started", "Cluster rollouts whose Dynamo graph was applied.", registry=WORKER_REGISTRY)
ROLLOUTS_SUCCEEDED = Counter(
    "wingsmith_rollouts_succeeded", "Cluster rollouts that reached serving.", registry=WORKER_REGISTRY)
ROLLOUTS_FAILED = Counter(
    "wingsmith_rollouts_failed", "Cluster rollouts that failed, by cause (the failure's error type).",
    ["cause"], registry=WORKER_REGISTRY)
REPLACEMENTS = Counter(
    "wingsmith_replacements", "Replicas sent back to placement because their cluster's rollout failed.",
    registry=WORKER_REGISTRY)
HEALS = Counter(
    "wingsmith_heals", "Drift repaired on a cluster by a workload's reconcile loop, by kind of drift.",
    ["kind"], registry=WORKER_REGISTRY)
APPROVAL_TO_SERVING = Histogram(
    "wingsmith_approval_to_serving_seconds", "From an artifact's approval to a workload of it first serving.",
    buckets=_SERVING_BUCKETS, registry=WORKER_REGISTRY)

_DECISION_WORDS = {"approve": "approved", "reject": "rejected", "expire": "expired"}
# Error types are class-like names from the plane's own code; anything else is folded into "other"
# so a surprising message can never mint a new series.
_TYPE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def cause_label(cause: str | None) -> str:
    """The error type in front of "Type: message" (how rollouts record their cause), or "other"."""
    kind = (cause or "").split(":", 1)[0].strip()
    return kind if _TYPE_NAME.fullmatch(kind) else "other"


def decision_label(decision: str) -> str:
    return _DECISION_WORDS.get(decision, "other")


def review_decided(decision: str, decided_at: datetime, draft_saved_at: datetime | None) -> None:
    label = decision_label(decision)
    ARTIFACTS_DECIDED.labels(label).inc()
    if draft_saved_at is not None:
        REVIEW_WAIT.labels(label).observe(max(0.0, (decided_at - draft_saved_at).total_seconds()))


def rollout_failed(cause: str | None, replicas: int) -> None:
    ROLLOUTS_FAILED.labels(cause_label(cause)).inc()
    # A failed apply always sends its replicas back to placement (the workload's converge loop).
    if replicas > 0:
        REPLACEMENTS.inc(replicas)


def heal(kind: str) -> None:
    """For the reconcile loop: one repaired drift (e.g. "dgd_missing", "spec_changed")."""
    HEALS.labels(cause_label(kind)).inc()


def approval_to_serving(approved_at: datetime, serving_at: datetime) -> None:
    APPROVAL_TO_SERVING.observe(max(0.0, (serving_at - approved_at).total_seconds()))


class ScrapedMetrics(Collector):
    """Re-exposes another exporter's families, parsed by prometheus_client: how the worker serves the
    Temporal SDK's own runtime metrics (a Rust exporter on a loopback port) on its one scrape port.
    `<prefix>_up` says whether that exporter answered this scrape."""

    def __init__(self, up_name: str, url: str | None = None, timeout: float = 2.0):
        self.up_name = up_name
        self.url = url  # None until the exporter is known: reported as down
        self.timeout = timeout

    def describe(self) -> Iterable[Metric]:
        return []  # the families are whatever the other exporter has; no scrape at registration

    def collect(self) -> Iterable[Metric]:
        families, up = [], 0
        if self.url is not None:
            try:
                with urllib.request.urlopen(self.url, timeout=self.timeout) as resp:  # noqa: S310 - our own URL
                    families, up = list(text_string_to_metric_families(resp.read().decode())), 1
            except (OSError, ValueError):
                pass
        yield GaugeMetricFamily(self.up_name, "1 when the other exporter answered this scrape.", value=up)
        yield from families


# The Temporal SDK's own exporter, re-exposed on the worker's port once the worker sets its URL.
SDK_METRICS = ScrapedMetrics("wingsmith_worker_sdk_metrics_up")
WORKER_REGISTRY.register(SDK_METRICS)

"""How workflow code runs: in Temporal's sandbox, which re-imports a workflow's modules for each run
and refuses non-deterministic calls (clock, randomness, I/O). Re-importing everything per run cost
about a tenth of the worker's CPU during journeys (bench/RESULTS.md); the modules that cannot change
between runs are imported once and shared instead: pydantic, the contracts and the pure domain
(wingsmith/domain/). Nothing else passes through, so a workflow that imports an adapter or an I/O
library still meets the sandbox (and tests/test_layers.py). The worker, the replay tests and the
workflow tests run workflows with this one runner."""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

# OpenTelemetry too, as Temporal's tracing interceptor expects (samples-python's open_telemetry sample):
# re-imported per run, its context globals split from the worker's, and the log processor's lookup of the
# current span (wingsmith/adapters/logs.py) imported it inside the sandbox in the middle of a workflow task.
SHARED_MODULES = ("pydantic", "pydantic_core", "annotated_types", "contracts", "opentelemetry", "wingsmith.domain")

WORKFLOW_RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules(*SHARED_MODULES))

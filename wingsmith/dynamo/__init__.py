"""Dynamo graph rendering and readiness: pure functions from a rollout to manifests and verdicts."""

from wingsmith.dynamo.names import dgd_name
from wingsmith.dynamo.render import GROUP, PLURAL, VERSION, RenderError, render_dgd
from wingsmith.dynamo.rollout_spec import Engine, Layout, RolloutSpec, WorkerPool

__all__ = ["GROUP", "PLURAL", "VERSION", "Engine", "Layout", "RenderError", "RolloutSpec",
           "WorkerPool", "dgd_name", "render_dgd"]

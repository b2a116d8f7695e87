"""Dynamo graph rendering and readiness: pure functions from a rollout to manifests and verdicts."""

from wingsmith.domain.dynamo.names import dgd_name
from wingsmith.domain.dynamo.render import (
           GROUP,
           PLURAL,
           SPEC_HASH_ANNOTATION,
           VERSION,
           RenderError,
           render_dgd,
           spec_hash,
)
from wingsmith.domain.dynamo.rollout_spec import Engine, Layout, RolloutSpec, WorkerPool

__all__ = ["GROUP", "PLURAL", "SPEC_HASH_ANNOTATION", "VERSION", "Engine", "Layout", "RenderError", "RolloutSpec",
           "WorkerPool", "dgd_name", "render_dgd", "spec_hash"]

"""structlog set-up shared by every process.

Everything goes through the standard library's logging so that Temporal's `workflow.logger` and
`activity.logger` (which carry workflow/activity ids and skip records during replay) end up in the
same JSON lines as our own structlog calls.
"""

from __future__ import annotations

import logging
import sys

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

_configured = False


def configure_logging(level: str = "INFO", fmt: str = "auto") -> None:
    global _configured
    if _configured:
        return
    _configured = True
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _temporal_extras,
        _trace_ids,
    ]
    renderer = structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "urllib3", "kubernetes", "asyncio", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _temporal_extras(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """Lift the ids Temporal's loggers attach (`temporal_workflow` / `temporal_activity`) into
    top-level keys, so every line says which workflow or activity wrote it."""
    record = event_dict.get("_record")
    if record is None:
        return event_dict
    wf = getattr(record, "temporal_workflow", None)
    if isinstance(wf, dict):
        event_dict.setdefault("workflow_id", wf.get("workflow_id"))
        event_dict.setdefault("run_id", wf.get("run_id"))
        event_dict.setdefault("workflow_type", wf.get("workflow_type"))
    act = getattr(record, "temporal_activity", None)
    if isinstance(act, dict):
        event_dict.setdefault("activity_id", act.get("activity_id"))
        event_dict.setdefault("activity_type", act.get("activity_type"))
        event_dict.setdefault("workflow_id", act.get("workflow_id"))
    return event_dict


def _trace_ids(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """The OpenTelemetry trace and span of the line, so one journey's lines can be found together
    (and opened in a tracing backend when traces are exported)."""
    from wingsmith.adapters.tracing import current_trace_ids
    for key, value in current_trace_ids().items():
        event_dict.setdefault(key, value)
    return event_dict


def get_logger(name: str | None = None):
    return structlog.get_logger(name)

"""What went wrong talking to a cluster, and whether trying again can help.

Every failure of the kubernetes client becomes a `KubeError` with a type name (used as the
Temporal ApplicationError type) and a retryable flag: schema rejections and permission errors
will fail the same way every time, while server errors, throttling, conflicts on a stale
resourceVersion and network trouble are worth another attempt.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from wingsmith.adapters.kube.kube_error import KubeError

T = TypeVar("T")
_MESSAGE_LIMIT = 500

# status -> (type, retryable)
_BY_STATUS = {
    400: ("BadRequest", False),
    401: ("Unauthorized", False),
    403: ("Forbidden", False),
    404: ("NotFound", False),
    405: ("MethodNotAllowed", False),
    409: ("Conflict", True),
    410: ("Gone", True),
    415: ("UnsupportedMediaType", False),
    422: ("SchemaRejected", False),
    429: ("Throttled", True),
}


def classify(exc: BaseException, *, doing: str = "") -> KubeError:
    """Map any exception raised by the kubernetes client to a KubeError."""
    prefix = f"{doing}: " if doing else ""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        if status in _BY_STATUS:
            kind, retryable = _BY_STATUS[status]
        elif status >= 500:
            kind, retryable = "ServerError", True
        elif status == 0:
            kind, retryable = "Unreachable", True
        else:
            kind, retryable = f"Http{status}", False
        return KubeError(kind, prefix + _api_message(exc), retryable=retryable, status=status)
    if isinstance(exc, ConfigException):
        text = str(exc)
        if text.startswith("exec:") or "Stderr:" in text:
            # A credential plugin's failure carries what the plugin printed, which may be a token.
            text = "a credential plugin failed (its output is withheld: it may contain credentials)"
        return KubeError("KubeconfigInvalid", prefix + text[:_MESSAGE_LIMIT], retryable=False)
    if isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError, OSError)):
        # The exception text may carry the server address but nothing secret.
        return KubeError("Unreachable", prefix + f"{type(exc).__name__}: {str(exc)[:200]}",
                         retryable=True)
    raise exc


def _api_message(exc: ApiException) -> str:
    """The Status message the API server sent (field errors for 422), else the HTTP reason."""
    text = None
    if exc.body:
        try:
            body = json.loads(exc.body)
            text = body.get("message") if isinstance(body, dict) else None
        except (ValueError, TypeError):
            text = None
    text = text or f"HTTP {exc.status} {exc.reason or ''}".strip()
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"


def with_retries(call: Callable[[], T], *, doing: str, attempts: int = 6, base_delay: float = 0.05,
                 max_delay: float = 2.0, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `call`, retrying retryable failures with jittered exponential backoff.

    The Temporal activity retry policy is the outer safety net; retrying here keeps one flaky
    response from costing a whole activity attempt (and its heartbeat timeout)."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - classify re-raises what it does not know
            err = classify(exc, doing=doing)
            if not err.retryable or attempt == attempts:
                raise err from None
            delay = min(max_delay, base_delay * 2 ** (attempt - 1))
            sleep(delay * (0.5 + random.random() / 2))
    raise AssertionError("unreachable")

"""Per-repository fault injection for the offline Hub, changed by tests while the server runs."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Literal

Scope = Literal["api", "files", "all"]


@dataclass
class FaultPlan:
    # Counted faults: the next N matching requests fail, later ones succeed (-1: fail forever).
    rate_limited: int = 0
    rate_limit_reset: int = 1          # seconds advertised in RateLimit (t=) and Retry-After
    server_errors: int = 0
    server_error_status: int = 500
    latency: float = 0.0               # seconds added before every answer for the repo
    gated: bool = False                # act as a gated repo the caller has no access to
    missing_revision: bool = False     # every revision of the repo is unknown
    hide_file_sizes: bool = False      # model info lists files without sizes (as without blobs=True)
    scope: Scope = "api"               # which routes counted faults and latency hit


@dataclass
class Faults:
    _plans: dict[str, FaultPlan] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, repo_id: str, **changes) -> FaultPlan:
        """Set faults for one repo (`"*"`: every repo)."""
        with self._lock:
            plan = replace(self._plans.get(repo_id, FaultPlan()), **changes)
            self._plans[repo_id] = plan
            return plan

    def clear(self, repo_id: str | None = None) -> None:
        with self._lock:
            if repo_id is None:
                self._plans.clear()
            else:
                self._plans.pop(repo_id, None)

    def plan(self, repo_id: str) -> FaultPlan:
        with self._lock:
            return self._plans.get(repo_id) or self._plans.get("*") or FaultPlan()

    def take(self, repo_id: str, route: Literal["api", "files"]) -> tuple[str, FaultPlan] | None:
        """Consume one counted fault that applies to this request, if any."""
        with self._lock:
            key = repo_id if repo_id in self._plans else "*"
            plan = self._plans.get(key)
            if plan is None or plan.scope not in (route, "all"):
                return None
            for kind in ("rate_limited", "server_errors"):
                left = getattr(plan, kind)
                if left:
                    if left > 0:
                        setattr(plan, kind, left - 1)
                    return kind, plan
            return None

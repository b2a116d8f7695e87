"""The local gateway's routing table: the routes the plane set, what the gateway has learnt about
each backend (cooling down, in flight), and the choice of a backend for each request.

Everything here runs on the gateway's one event loop, so plain attributes need no locks.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

from wingsmith.adapters.logs import get_logger
from wingsmith.domain.gateway.routes import Backend, BackendStatus, EndpointRoutes, RouteStatus

log = get_logger("wingsmith.gateway")
STATE_FILE = "routes.json"


@dataclass
class BackendState:
    backend: Backend
    cooling_since: float | None = None  # monotonic time of the failure that started the cool-down
    next_probe: float = 0.0
    in_flight: int = 0
    requests: int = 0
    failures: int = 0
    last_error: str | None = None
    current: float = 0.0  # smooth weighted round-robin counter

    @property
    def cooling(self) -> bool:
        return self.cooling_since is not None


@dataclass
class Endpoint:
    routes: EndpointRoutes
    backends: dict[str, BackendState] = field(default_factory=dict)


def _status(endpoint: Endpoint) -> RouteStatus:
    return RouteStatus(routes=endpoint.routes, backends=[
        BackendStatus(id=s.backend.id, weight=s.backend.weight, healthy=not s.cooling,
                      cooling_down=s.cooling, in_flight=s.in_flight, requests=s.requests,
                      failures=s.failures, last_error=s.last_error)
        for s in endpoint.backends.values()])


class RouteTable:
    def __init__(self, state_dir: Path | None, *, first_probe_after: float = 0.5):
        self._endpoints: dict[str, Endpoint] = {}
        self._file = state_dir / STATE_FILE if state_dir else None
        self.first_probe_after = first_probe_after
        self.cooldown_listeners: list[Callable[[BackendState], None]] = []  # e.g. the metrics' counter
        if self._file and self._file.exists():
            self._load()

    # ---- routes (the admin API) ------------------------------------------------------------------

    def models(self) -> list[str]:
        return sorted(self._endpoints)

    def get(self, model: str) -> EndpointRoutes | None:
        endpoint = self._endpoints.get(model)
        return endpoint.routes if endpoint else None

    def all(self) -> list[EndpointRoutes]:
        return [self._endpoints[m].routes for m in self.models()]

    def set(self, routes: EndpointRoutes) -> RouteStatus:
        """Replace the model's routes; answers the status it now has."""
        old = self._endpoints.get(routes.model_name)
        states: dict[str, BackendState] = {}
        for backend in routes.backends:
            prior = old.backends.get(backend.id) if old else None
            if prior is not None and prior.backend.url == backend.url:
                # Same deployment, new weight: keep what we learnt (cool-down, in-flight, counters).
                prior.backend = backend
                states[backend.id] = prior
            else:
                states[backend.id] = BackendState(backend)
        endpoint = self._endpoints[routes.model_name] = Endpoint(routes, states)
        self._save()
        return _status(endpoint)

    def delete(self, model: str) -> bool:
        existed = self._endpoints.pop(model, None) is not None
        if existed:
            self._save()
        return existed

    def status(self, model: str) -> RouteStatus | None:
        endpoint = self._endpoints.get(model)
        return _status(endpoint) if endpoint is not None else None

    def statuses(self) -> list[RouteStatus]:
        return [_status(self._endpoints[m]) for m in self.models()]

    # ---- choosing a backend ----------------------------------------------------------------------

    # AbstractSet, not set: inside this class `set` names the method RouteTable.set.
    def pick(self, model: str, exclude: AbstractSet[str] = frozenset()) -> BackendState | None:
        """Smooth weighted round-robin over the backends that take traffic and are not cooling down.

        Round-robin rather than random: shares follow the weights exactly over a few requests, so a
        small endpoint does not pile a burst onto one backend by chance. When every weighted backend
        is cooling down, one of them is tried anyway: a request that may fail beats a certain 503."""
        endpoint = self._endpoints.get(model)
        if endpoint is None:
            return None
        weighted = [s for s in endpoint.backends.values() if s.backend.weight > 0 and s.backend.id not in exclude]
        ready = [s for s in weighted if not s.cooling]
        if not ready:
            # Longest cooled first: the most likely to have recovered.
            return min(weighted, key=lambda s: s.cooling_since or 0.0, default=None)
        total = sum(s.backend.weight for s in ready)
        for s in ready:
            s.current += s.backend.weight
        chosen = max(ready, key=lambda s: s.current)
        chosen.current -= total
        return chosen

    def failed(self, state: BackendState, reason: str) -> None:
        state.failures += 1
        state.last_error = reason
        if not state.cooling:
            now = time.monotonic()
            state.cooling_since = now
            state.next_probe = now + self.first_probe_after
            log.warning("gateway backend cooling down", backend=state.backend.id, reason=reason)
            for listener in self.cooldown_listeners:
                listener(state)

    def recovered(self, state: BackendState) -> None:
        if state.cooling:
            log.info("gateway backend recovered", backend=state.backend.id)
        state.cooling_since = None
        state.current = 0.0

    def due_probes(self, now: float) -> list[tuple[str, BackendState]]:
        return [(model, s) for model, e in self._endpoints.items() for s in e.backends.values()
                if s.cooling and s.next_probe <= now]

    # ---- persistence -----------------------------------------------------------------------------

    def _save(self) -> None:
        if self._file is None:
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        payload = {"routes": [r.model_dump(mode="json") for r in self.all()]}
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, indent=1))
        # Rename is atomic: a crash mid-write leaves the previous routes, never half a file.
        os.replace(tmp, self._file)

    def _load(self) -> None:
        assert self._file is not None
        try:
            payload = json.loads(self._file.read_text())
            routes = [EndpointRoutes.model_validate(r) for r in payload.get("routes", [])]
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"cannot read the gateway's saved routes in {self._file}: {exc}") from None
        for r in routes:
            self._endpoints[r.model_name] = Endpoint(r, {b.id: BackendState(b) for b in r.backends})

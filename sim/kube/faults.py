"""Faults one simulated cluster can be told to show, settable at runtime from Python
(`clusters.faults("sim-east").crash_loop = True`) or over the admin route."""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr


class FrontendFaults(BaseModel):
    """What one DGD's simulated frontend does to completions: a bad version to try an upgrade with."""

    model_config = ConfigDict(extra="forbid")

    error_rate: float = Field(0.0, ge=0, le=1, description="fraction of completions answered 500")
    latency: float = Field(0.0, ge=0, le=30, description="seconds added before every completion answers")


class Faults(BaseModel):
    model_config = ConfigDict(validate_assignment=True, extra="forbid")

    never_ready: bool = Field(False, description="worker pods run but never pass their startup probe")
    crash_loop: bool = Field(False, description="worker containers exit 1 and sit in CrashLoopBackOff")
    image_pull: bool = Field(False, description="worker images cannot be pulled (ImagePullBackOff)")
    oom_killed: bool = Field(False, description="worker containers are OOMKilled again and again")
    operator_failed: bool = Field(False, description="the operator reports state `failed` (reconcile error)")
    api_error_rate: float = Field(0.0, ge=0, le=1, description="fraction of API calls answered 500")
    conflict_rate: float = Field(0.0, ge=0, le=1, description="fraction of API writes answered 409 Conflict")
    latency: float = Field(0.0, ge=0, le=30, description="seconds added to every API call")
    unreachable: bool = Field(False, description="a network partition: the API and the frontends answer 503, "
                                                 "while inside the cluster everything keeps running")
    frontends: dict[str, FrontendFaults] = Field(
        default_factory=dict, description="per DGD name: injected completion errors and latency")
    restart_interval: float = Field(0.25, gt=0, description="seconds between simulated container restarts")
    seed: int | None = Field(None, description="seed for the random draws behind the rates")

    _random: random.Random = PrivateAttr(default_factory=random.Random)
    # How many faults of each kind were served: a chaos run reports what it really injected.
    _injected: dict[str, int] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: object) -> None:
        self._random = random.Random(self.seed)

    def draw(self, rate: float, kind: str | None = None) -> bool:
        hit = rate > 0 and self._random.random() < rate
        if hit and kind:
            self._injected[kind] = self._injected.get(kind, 0) + 1
        return hit

    @property
    def injected(self) -> dict[str, int]:
        return dict(self._injected)

    def reset(self) -> None:
        for name, info in type(self).model_fields.items():
            setattr(self, name, info.get_default(call_default_factory=True))
        self._random = random.Random(self.seed)

    def update(self, changes: dict[str, object]) -> None:
        """Set several faults at once, all or nothing (a bad value leaves every fault as it was)."""
        merged = type(self).model_validate({**self.model_dump(), **changes})
        for name in changes:
            setattr(self, name, getattr(merged, name))
        if "seed" in changes:
            self._random = random.Random(self.seed)

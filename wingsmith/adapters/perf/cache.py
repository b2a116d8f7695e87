"""Estimates already made, as files under $WINGSMITH_HOME/perf-cache: one JSON file per key.

The key holds everything the figures depend on (model and its commit or config, card, layout, backend,
ISL/OSL, targets, GPU budget, and the tool's and its database's versions), so a new AIConfigurator or a
new database simply misses. A cache, not state: losing it costs one search again, so each worker keeps
its own and no table or migration is needed. Files are written whole (write, then rename), so a reader
never sees half a file, and two workers writing the same key write the same content.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)


class CacheKey(BaseModel, frozen=True):
    kind: str  # "estimate" or "target"
    model: str
    model_commit: str | None
    config_digest: str | None
    card: str
    layout: str
    backend: str
    isl: int
    osl: int
    ttft_ms: float | None
    tpot_ms: float | None
    gpus: int
    requests_per_second: float | None = None
    tool_version: str
    database_version: str

    def digest(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


class EstimateCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: CacheKey) -> Path:
        digest = key.digest()
        return self.root / digest[:2] / f"{digest}.json"

    def get(self, key: CacheKey, kind: type[T]) -> T | None:
        try:
            stored = json.loads(self._path(key).read_bytes())
            if CacheKey.model_validate(stored["key"]) != key:
                return None  # a digest collision, however unlikely, must not answer for another key
            return kind.model_validate(stored["value"])
        except (FileNotFoundError, KeyError, TypeError, ValidationError, ValueError):
            return None  # absent, or written by an older plane in another shape: search again

    def put(self, key: CacheKey, value: BaseModel) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"key": key.model_dump(mode="json"), "value": value.model_dump(mode="json")})
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.root.rglob("*.json")) if self.root.exists() else 0

"""Freeze the recorded histories as a release's: `python -m tests.histories.freeze 0.1.0` copies every
tests/histories/*.json into tests/histories/<release>/ and writes its MANIFEST (sha256 of each file).

Run once, when a release is cut. From then on tests/test_replay.py replays the frozen files against the
code of every later commit and fails when one stops replaying or its bytes change: a change to a
workflow's commands must go behind `workflow.patched` (docs/production.md, "Upgrading the plane")."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

HISTORIES = Path(__file__).resolve().parent


def manifest_of(folder: Path) -> str:
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in sorted(folder.glob("*.json"))]
    return "\n".join(lines) + "\n"


def freeze(release: str) -> Path:
    target = HISTORIES / release
    if target.exists():
        raise SystemExit(f"{target} exists: a release's histories are frozen once")
    target.mkdir()
    for path in sorted(HISTORIES.glob("*.json")):
        shutil.copy2(path, target / path.name)
    (target / "MANIFEST").write_text(manifest_of(target))
    return target


if __name__ == "__main__":
    print(freeze(sys.argv[1]))

"""Where the plane's processes spend their CPU: py-spy samples of the gateway, the API and the worker,
each while bench/report.py's load for it runs.

    .venv/bin/python -m pip install py-spy   # a developer tool, not a dependency
    .venv/bin/python bench/profile.py [--seconds 15] [--out DIR] [--only gateway,api,worker]

Prints, per process, the share of its on-CPU samples by package (the innermost frame's) and the
innermost functions that took the most; DIR keeps py-spy's collapsed stacks (`<process>.txt`, for
flamegraph tools) and a speedscope file per process.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules, as when run directly

import httpx  # noqa: E402
import load  # noqa: E402
from gateway_speed import GatewayRig, paired_latency  # noqa: E402

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
LAYERS = ("api", "wingsmith", "worker", "workflows", "activities", "sim")


def py_spy() -> str:
    found = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: .venv/bin/python -m pip install py-spy")
    return found


def record(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    """Start sampling `pid` for `seconds` (on-CPU samples only) into out (collapsed stacks)."""
    return subprocess.Popen([py_spy(), "record", "--pid", str(pid), "--rate", "200", "--duration", str(int(seconds)),
                             "--format", "raw", "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def where(frame: str) -> tuple[str, str]:
    """(package, function) of one collapsed frame; py-spy names files from their package down."""
    m = FRAME.match(frame.strip())
    func, file = (m["func"], m["file"]) if m else (frame, "")
    parts = Path(file).parts
    package = parts[0].removesuffix(".py") if parts and parts[-1] != "__main__.py" else "?"
    if package in LAYERS and len(parts) > 2:
        package = f"{parts[0]}/{parts[1]}"
    return package, f"{func} ({file})"


def summarise(name: str, stacks: Path, top: int = 10) -> str:
    inclusive: Counter[str] = Counter()  # samples with the package anywhere on the stack
    leaf: Counter[str] = Counter()
    total = 0
    for line in stacks.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if not frames or not count.isdigit():
            continue
        found = [where(f) for f in frames.split(";")]
        for package in {p for p, _ in found}:
            inclusive[package] += int(count)
        leaf[found[-1][1]] += int(count)
        total += int(count)
    if not total:
        return f"{name}: no samples"
    skip = {"<frozen runpy>", "asyncio", "uvicorn", "?", "threading"}  # on nearly every stack: says nothing
    lines = [f"{name}: {total} on-CPU samples",
             "  stacks through: " + ", ".join(f"{p} {100 * n / total:.0f}%" for p, n in inclusive.most_common(40)
                                               if p not in skip)[:600],
             "  innermost functions:"]
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in leaf.most_common(top)]
    return "\n".join(lines)


def until(proc: subprocess.Popen, work) -> None:
    while proc.poll() is None:
        work()


def profile_gateway(seconds: float, out: Path) -> str:
    with GatewayRig() as rig, httpx.Client(timeout=10, trust_env=False) as http:
        rig.route(rig.east)
        spy = record(rig.gateway.pid, seconds, out / "gateway.txt")
        until(spy, lambda: paired_latency(http, rig.east.url, rig.url, 200))
    return summarise("gateway (chat completions, one client)", out / "gateway.txt")


def profile_plane(seconds: float, out: Path, which: list[str]) -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="wingsmith-profile-"))
    plane = load.start_plane(root)
    api, worker = (next(p for p in plane.children if p.args[-1] == mod) for mod in ("api", "worker"))
    try:
        return asyncio.run(_plane(plane, api.pid, worker.pid, seconds, out, which))
    finally:
        load.stop_plane(plane)
        shutil.rmtree(root, ignore_errors=True)


async def _plane(plane: load.Plane, api: int, worker: int, seconds: float, out: Path, which: list[str]) -> list[str]:
    found = []
    async with httpx.AsyncClient(base_url=plane.api_url, timeout=60, limits=httpx.Limits(max_connections=16)) as http:
        if "api" in which:
            spy = record(api, seconds, out / "api.txt")
            while spy.poll() is None:
                await load.resolve_and_healthz(plane, http, 400, 8, blocks=1)
            found.append(summarise("API (cached resolve and /healthz, 8 callers)", out / "api.txt"))
        if "worker" in which:
            spy = record(worker, seconds, out / "worker.txt")
            started = time.monotonic()
            while spy.poll() is None and time.monotonic() - started < seconds:
                await load.measure_journey(plane, http, 3)
            spy.wait()
            found.append(summarise("worker (journeys, 3 at a time)", out / "worker.txt"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--out", type=Path, default=None, help="keep the collapsed stacks here")
    parser.add_argument("--only", default="gateway,api,worker")
    args = parser.parse_args()
    which = [w.strip() for w in args.only.split(",")]
    out = args.out or Path(tempfile.mkdtemp(prefix="wingsmith-profile-out-"))
    out.mkdir(parents=True, exist_ok=True)
    if "gateway" in which:
        print(profile_gateway(args.seconds, out), flush=True)
    if "api" in which or "worker" in which:
        for text in profile_plane(args.seconds, out, which):
            print(text, flush=True)
    print(f"collapsed stacks in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

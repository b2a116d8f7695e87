"""The README's journey works on any home and any ports: its HTTP calls take the plane's addresses
from `$WINGSMITH_HOME/plane.json` and the tokens from `$WINGSMITH_HOME/tokens.json` (never a fixed
`.wingsmith/tokens.json`, `:8000` or `:8080`), and its HTTP review sends the `draft_version` the API
requires.

And it runs as written (issue 52): every command of its block, in order, on a fresh `wingsmith up
--offline-hub` with the perf extra (the traffic examples plan with AIConfigurator for real), each answering
as its comment says; then `wingsmith demo` beside it creates nothing without asking and leaves the journey's
endpoint and workload as they were."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sim.hub import load_snapshot
from tests.foundation.test_up import Up
from tests.perf.conftest import perf_home  # noqa: F401  (the session's perf cache)
from tests.perf_extra import require_perf_extra
from wingsmith.domain.perf.estimates import NOT_INSTALLED

README = Path(__file__).resolve().parents[2] / "README.md"


def _journey() -> str:
    text = README.read_text()
    section = text[text.index("## The journey, step by step"):]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_journey_names_no_fixed_home_or_port():
    block = _journey()
    for fixed in (".wingsmith/tokens.json", ":8000", ":8080"):
        assert fixed not in block, fixed


def test_the_http_review_sends_the_draft_version():
    block = _journey()
    calls = [c for c in block.split("curl")[1:] if "/review" in c.split("\n")[0]]
    assert calls, "the journey has no HTTP review call"
    for call in calls:
        body = json.loads(re.search(r"-d '(\{.*?\})'", call, re.S).group(1))
        assert body["decision"] == "approve" and isinstance(body["draft_version"], int)


def test_the_addresses_and_tokens_come_from_the_home(tmp_path):
    home = tmp_path / "elsewhere"
    home.mkdir()
    plane = {"api_url": "http://127.0.0.1:18123", "gateway_url": "http://127.0.0.1:18124"}
    tokens = {"admin-token": {"name": "local-admin", "roles": ["admin"]},
              "reviewer-token": {"name": "local-reviewer", "roles": ["approver"]}}
    (home / "plane.json").write_text(json.dumps(plane))
    (home / "tokens.json").write_text(json.dumps(tokens))
    block = _journey()
    start = block.index("home() {")
    setup = block[start:block.index("curl", start)]  # the helper and the variables, before any call
    script = f"export WINGSMITH_HOME={shlex.quote(str(home))}\n{setup}\necho \"$API $GATEWAY $TOKEN $REVIEWER\""
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [plane["api_url"], plane["gateway_url"], *tokens]


# ---- the journey itself, command by command, on a plane of its own (issue 52) ----------------------------

ROOT = README.parent
KIMI = "moonshotai/Kimi-K3"
# Where a command says what else it answers with ("exits 2, ..."): everything else must exit 0.
EXPECTED_EXIT = re.compile(r"#.*\bexits (\d)\b")


def _complete(text: str) -> bool:
    """Whether bash reads `text` as whole commands (no quote, brace or line left open), with `<sha>` filled in
    as the reader does (unfilled, bash would read a redirection)."""
    if text.rstrip().endswith("\\"):
        return False
    filled = text.replace("<sha>", "0" * 40)
    return subprocess.run(["bash", "-n"], input=filled, capture_output=True, text=True).returncode == 0


def journey_commands(block: str) -> list[str]:
    """Each command of the journey's block as bash reads it (continued lines and multi-line quotes whole);
    comment lines between commands are not commands."""
    commands: list[str] = []
    current: list[str] = []
    for line in block.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current.append(line)
        if _complete("\n".join(current)):
            commands.append("\n".join(current))
            current = []
    assert not current, f"an unfinished command at the end of the journey: {current}"
    return commands


def test_the_journey_is_read_command_by_command():
    commands = journey_commands(_journey())
    assert commands[0].startswith(".venv/bin/wingsmith resolve hf:moonshotai/Kimi-K3")
    assert commands[-1].startswith(".venv/bin/wingsmith clusters check sim-east")
    helper = next(c for c in commands if c.startswith("home() {"))
    assert helper.endswith('"$@"; }')  # the helper's two lines are one command
    assert all(not c.lstrip().startswith("#") for c in commands)
    assert [c for c in commands if EXPECTED_EXIT.search(c)], "the unreachable target says it exits 2"


def _run_journey(commands: list[str], sha: str, env: dict[str, str], out: Path) -> list[tuple[str, int, str, str]]:
    """Every command in one bash (the journey's variables and helper carry from command to command), as
    written but for `<sha>`; each command's exit code and output kept apart."""
    script = ["set +e"]
    for i, command in enumerate(commands):
        script.append(f"{{\n{command.replace('<sha>', sha)}\n}} >{out}/{i}.out 2>{out}/{i}.err </dev/null\n"
                      f"echo $? >{out}/{i}.rc")
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=3600)
    assert done.returncode == 0, done.stderr
    return [(c, int((out / f"{i}.rc").read_text()), (out / f"{i}.out").read_text(), (out / f"{i}.err").read_text())
            for i, c in enumerate(commands)]


def _check(command: str, code: int, out: str, err: str) -> None:
    """What each command must answer, beyond its exit code."""
    said = f"{command}\n--- exit {code}, stdout:\n{out[-3000:]}\n--- stderr:\n{err[-3000:]}"
    expected = EXPECTED_EXIT.search(command)
    assert code == (int(expected.group(1)) if expected else 0), said
    if command.startswith("curl"):
        answer = json.loads(out)
        assert "error" not in answer, said
        if "/chat/completions" in command:
            assert answer["choices"][0]["message"]["content"], said
    if " resolve " in command:  # the evidence and the sizing, without --json
        assert "vLLM recipe" in out and "published floor" in out and "sized on" in out, said
    if "--target-rps" in command:
        # Progress while AIConfigurator plans (the API answered at once), and every card the fleet has:
        # the simulated GB200 cluster's is read from its live inventory.
        assert "planning on h200, gb200" in err and "searching " in err, said
        if expected:
            assert "best reachable on h200: TTFT" in err and "\ngb200 " in err, said
        else:
            assert "chosen: h200" in out, said
    if "endpoints create" in command:
        assert "routed: the gateway sends 'kimi-k3'" in out, said


def _api(up: Up, method: str, path: str) -> dict:
    token = up.token()
    return httpx.request(method, f"{up.api}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()


def _demo(up: Up, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wingsmith.cli.main", "demo", *args], env=up.env, cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_every_command_of_the_journey_runs_as_written_then_the_demo_leaves_it_alone(tmp_path, perf_home):  # noqa: F811
    require_perf_extra()  # the traffic examples plan with AIConfigurator (scripts/test.sh installs it)
    up = Up(tmp_path / "home", perf_home)  # the session's perf cache: a search another test made is not made again
    for told in ("WINGSMITH_API_URL", "WINGSMITH_GATEWAY_URL"):  # as a person's shell: the plane is in plane.json
        up.env.pop(told)
    up.start("--offline-hub")
    try:
        up.wait_ready(timeout=180)
        assert NOT_INSTALLED not in up.out.read_text(), up.out.read_text()  # its perf worker runs
        sha = load_snapshot()["models"][KIMI]["sha"]
        out = tmp_path / "journey"
        out.mkdir()
        for command, code, printed, errors in _run_journey(journey_commands(_journey()), sha, up.env, out):
            _check(command, code, printed, errors)

        # `wingsmith demo` after the journey: names of its own, and it asks before it adds GPUs beside the
        # journey's workload (nobody can answer here: it stops, having created nothing).
        asked = _demo(up)
        assert asked.returncode == 1 and "not without asking" in asked.stderr, asked.stdout + asked.stderr
        assert "demo-kimi-k3" not in [w["id"] for w in _api(up, "GET", "/v1/workloads")["workloads"]]
        told = _demo(up, "--yes")
        assert told.returncode == 0, told.stdout + told.stderr
        assert "Hello from demo-kimi-k3" in told.stdout
        # The journey's endpoint and workload are as the journey left them.
        endpoint = _api(up, "GET", "/v1/endpoints/kimi-k3")
        assert endpoint["workloads"] == ["kimi"] and {r["workload_id"] for r in endpoint["routes"]} == {"kimi"}
        kimi = _api(up, "GET", "/v1/workloads/kimi")
        assert sum(c["replicas"] for c in kimi["live"]["clusters"]) == 2, kimi
    finally:
        assert up.stop() == 0

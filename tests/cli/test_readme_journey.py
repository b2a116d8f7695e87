"""The README's journey works on any home and any ports: its HTTP calls take the plane's addresses
from `$WINGSMITH_HOME/plane.json` and the tokens from `$WINGSMITH_HOME/tokens.json` (never a fixed
`.wingsmith/tokens.json`, `:8000` or `:8080`), and its HTTP review sends the `draft_version` the API
requires."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

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

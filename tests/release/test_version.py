"""Which code answers: `wingsmith --version` and the API's `/version` name the release and the build
(issue 50), from one place (wingsmith/adapters/version.py)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import httpx

from api.app import create_app
from api.auth import TokenTable
from wingsmith.adapters.version import build, release
from wingsmith.domain.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_release_is_the_packages():
    assert release() == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert release() in (ROOT / "CHANGELOG.md").read_text()


def test_the_cli_names_release_and_build(monkeypatch):
    env = {"WINGSMITH_BUILD": "img-2026.12.06-abc", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "wingsmith.cli.main", "--version"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wingsmith {release()} (build img-2026.12.06-abc)"


def test_a_checkout_names_its_commit():
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if commit:  # a checkout (CI's clean clone is one); an unpacked source tree says "unknown"
        assert build().startswith(commit)


async def test_the_api_answers_version_to_anyone(tmp_path):
    settings = Settings(home=tmp_path / "home", auth_tokens="{}")
    app = create_app(settings, tokens=TokenTable.from_json("{}"), db=None, temporal=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        r = await client.get("/version")
        assert r.status_code == 200, r.text
        assert r.json() == {"release": release(), "build": build()}
        assert (await client.get("/openapi.json")).json()["info"]["version"] == release()

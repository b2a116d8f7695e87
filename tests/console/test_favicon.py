"""The console has an icon (issue 52: `/favicon.ico` was 404, in every browser's console and access log):
each page names it, it is served beside the stylesheet and at `/favicon.ico`, where browsers ask by habit,
and an installed plane carries it (package data)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

from console.favicon import ICON

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


async def test_the_icon_is_answered_where_browsers_ask_and_where_pages_name_it(anon):
    login = await anon.get("/console/login")
    [linked] = re.findall(r'<link rel="icon" href="([^"]+)"', login.text)
    for path in (linked, "/favicon.ico"):
        answer = await anon.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
        assert answer.headers["content-type"] == "image/svg+xml", path
        assert ET.fromstring(answer.content).tag == "{http://www.w3.org/2000/svg}svg"
        assert answer.content == ICON.read_bytes()


def test_an_installed_plane_carries_the_icon():
    data = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]
    patterns = [g for key in ("", "*", "console.static") for g in data.get(key, [])]
    assert any(fnmatch.fnmatchcase(ICON.name, g) for g in patterns), patterns

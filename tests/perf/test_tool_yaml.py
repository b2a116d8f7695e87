"""AIConfigurator's YAML parsed in C (wingsmith/adapters/perf/tool_yaml.py): the same objects, from every YAML
file the tool ships, and the reading modules of the pinned version really switched, so a search's hundreds of
reads never reach PyYAML's Python parser."""

from __future__ import annotations

import importlib
from importlib import resources
from pathlib import Path

import pytest
import yaml

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from wingsmith.adapters.perf.tool_yaml import IN_C, READERS, parse_the_tools_yaml_in_c


def _shipped_yaml() -> list[Path]:
    found = []
    for package in ("aiconfigurator", "aiconfigurator_core"):
        root = Path(str(resources.files(package)))
        found += sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    return found


def test_every_yaml_file_the_tool_ships_parses_to_the_same_object_in_c():
    files = _shipped_yaml()
    assert len(files) > 100  # the systems, versions and collections: the tool's own data, not an empty glob
    for path in files:
        text = path.read_text()
        assert yaml.load(text, Loader=yaml.CSafeLoader) == yaml.load(text, Loader=yaml.SafeLoader), path  # noqa: S506


def test_the_tools_readers_are_switched_and_read_nothing_in_python(monkeypatch):
    from aiconfigurator_core.sdk import perf_database

    before = perf_database.get_supported_databases()
    assert parse_the_tools_yaml_in_c() == list(READERS)
    assert parse_the_tools_yaml_in_c() == list(READERS)  # again: nothing changes
    assert all(importlib.import_module(name).yaml is IN_C for name in READERS)
    assert yaml.safe_load is not IN_C.safe_load  # PyYAML itself, for the rest of the process, untouched

    def python_parser(*_args, **_kwargs):
        raise AssertionError("the tool read its YAML with PyYAML's Python parser")

    # The tool catches a failed read per file and goes on without it: the same answer proves none failed.
    monkeypatch.setattr(yaml.parser.Parser, "parse_stream_start", python_parser)
    assert perf_database.get_supported_databases() == before != {}
    with pytest.raises(AssertionError, match="Python parser"):
        yaml.safe_load("a: 1")  # the trap is set: a module not switched would have hit it

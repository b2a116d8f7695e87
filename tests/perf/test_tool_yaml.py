"""AIConfigurator's YAML parsed in C (wingsmith/adapters/perf/tool_yaml.py): the same objects, from every YAML
file the tool ships, and the reading modules of the pinned version really switched, so a search's hundreds of
reads never reach PyYAML's Python parser; the tool's own files parsed once, each read a copy of its own."""

from __future__ import annotations

import importlib
import os
from importlib import resources
from pathlib import Path

import pytest
import yaml

import tests.needs_perf_extra  # noqa: F401  (missing: skipped outside CI with why, fails in CI)
from wingsmith.adapters.perf.tool_yaml import IN_C, READERS, _SafeLoadingInC, parse_the_tools_yaml_in_c


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


def _read(reader, path: Path, **loader):
    with open(path) as f:
        return reader.load(f, **loader) if loader else reader.safe_load(f)


def test_a_file_of_the_tools_install_is_parsed_once_and_each_read_gets_its_own_copy(tmp_path, monkeypatch):
    reader = _SafeLoadingInC(roots=(str(tmp_path.resolve()) + os.sep,))
    system = tmp_path / "h200_sxm.yaml"
    system.write_text("gpu: {mem_bw: 4.8e+12, sm: 132}\nnodes: [1, 2]\n")
    first = _read(reader, system)
    assert first == {"gpu": {"mem_bw": 4.8e12, "sm": 132}, "nodes": [1, 2]}
    first["gpu"]["sm"] = 0  # the tool changes what it was given...
    first["nodes"].append(3)

    def parsed(*_args, **_kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(yaml, "load", parsed)
    # ...and the next read, from the memo (PyYAML is not called), is the file as written, whichever way asked.
    assert _read(reader, system) == _read(reader, system, Loader=yaml.SafeLoader) == \
        {"gpu": {"mem_bw": 4.8e12, "sm": 132}, "nodes": [1, 2]}
    monkeypatch.undo()
    system.write_text("gpu: {mem_bw: 8.0e+12, sm: 148}\n")  # another file there now: parsed again
    assert _read(reader, system) == {"gpu": {"mem_bw": 8.0e12, "sm": 148}}


def test_a_file_elsewhere_is_parsed_at_every_read(tmp_path, monkeypatch):
    install, elsewhere = tmp_path / "install", tmp_path / "elsewhere.yaml"
    install.mkdir()
    elsewhere.write_text("a: 1\n")
    reader = _SafeLoadingInC(roots=(str(install.resolve()) + os.sep,))
    assert _read(reader, elsewhere) == {"a": 1}
    reads = []
    real_load = yaml.load
    monkeypatch.setattr(yaml, "load", lambda stream, Loader: reads.append(stream.name) or real_load(stream, Loader))  # noqa: S506
    assert _read(reader, elsewhere) == _read(reader, elsewhere) == {"a": 1}
    assert reads == [str(elsewhere)] * 2


def test_the_tools_own_files_are_read_from_the_memo(monkeypatch):
    shipped = _shipped_yaml()[0]
    first = _read(IN_C, shipped)
    monkeypatch.setattr(yaml, "load", lambda *_a, **_k: pytest.fail("a shipped file was parsed twice"))
    assert _read(IN_C, shipped) == first

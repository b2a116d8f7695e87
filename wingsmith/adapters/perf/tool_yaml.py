"""AIConfigurator's own YAML files, parsed by libyaml (PyYAML's C parser) instead of PyYAML's Python one.

One search reads the system, version and collection files shipped in the tool's wheel about seven hundred
times, each with `yaml.safe_load`, whose parser is pure Python: on this repository's 2-core machine about an
eighth of a search's CPU. PyYAML's wheels carry libyaml as `CSafeLoader`, which builds the same objects
(the same constructor, only the scanner and parser in C: tests/perf/test_tool_yaml.py loads every YAML file
the tool ships both ways and compares). The tool's reading modules are handed a `yaml` whose safe loading
is the C one; PyYAML itself, and every other module of the process, is left as it is.

The files under the tool's own install are also parsed once per process: they do not change while it runs
(an upgrade is a new process), and a search reads each of them hundreds of times. A read is served a deep copy
of the first parse, so the tool may change what it was given without changing the next read, and a file is
parsed again when its size, inode or modification time differ. Files elsewhere are parsed at every read. On
this machine the memo took another seventh off a search's CPU (a Qwen3-8B default search on H200 plus a
recommend on B200, two rounds: 52.5 CPU-s with the C parser alone, 45.0 with the memo; the same figures).
"""

from __future__ import annotations

import copy
import importlib
import os
import threading
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import yaml

# The modules of the tool (the version the perf extra pins) that read its YAML.
READERS = ("aiconfigurator_core.sdk.perf_database", "aiconfigurator_core.sdk.operations.base",
           "aiconfigurator_core.sdk.attention_lanes")


def _install_roots() -> tuple[str, ...]:
    """Where the tool is installed (its packages' folders), as path prefixes."""
    roots = []
    for package in ("aiconfigurator", "aiconfigurator_core"):
        spec = find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            roots.append(str(Path(location).resolve()) + os.sep)
    return tuple(roots)


class _SafeLoadingInC:
    """PyYAML as the tool calls it (`yaml.safe_load(f)`, `yaml.load(f, Loader=yaml.SafeLoader)`,
    `except yaml.YAMLError`), with the safe loader in C and the tool's own files parsed once (module
    docstring); every other name is PyYAML's own. `roots`: the folders whose files are parsed once (the
    tool's install when None)."""

    SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def __init__(self, roots: tuple[str, ...] | None = None) -> None:
        self._roots = roots
        self._parsed: dict[tuple[str, int, int, int], Any] = {}
        self._lock = threading.Lock()

    def safe_load(self, stream: Any) -> Any:
        return self._load(stream)

    def load(self, stream: Any, Loader: Any) -> Any:  # noqa: N803  (PyYAML's own keyword)
        if Loader in (yaml.SafeLoader, self.SafeLoader):
            return self._load(stream)
        return yaml.load(stream, Loader=Loader)  # noqa: S506  (the caller's loader, as PyYAML would)

    def _load(self, stream: Any) -> Any:
        key = self._key(stream)
        if key is None:
            return yaml.load(stream, Loader=self.SafeLoader)  # noqa: S506  (the safe loader, in C)
        with self._lock:
            if key not in self._parsed:
                self._parsed[key] = yaml.load(stream, Loader=self.SafeLoader)  # noqa: S506  (as above)
            return copy.deepcopy(self._parsed[key])

    def _key(self, stream: Any) -> tuple[str, int, int, int] | None:
        """An open file of the tool's own install, by path, inode, size and modification time; else None."""
        if self._roots is None:
            self._roots = _install_roots()
        name = getattr(stream, "name", None)
        if not isinstance(name, str) or not self._roots:
            return None
        path = os.path.realpath(name)
        if not path.startswith(self._roots):
            return None
        try:
            st = os.fstat(stream.fileno())
        except (AttributeError, OSError, ValueError):
            return None
        return path, st.st_ino, st.st_size, st.st_mtime_ns

    def __getattr__(self, name: str) -> Any:
        return getattr(yaml, name)


IN_C = _SafeLoadingInC()


def parse_the_tools_yaml_in_c() -> list[str]:
    """Hand the tool's reading modules the C loader (once is enough; again changes nothing). The modules
    switched; none when this PyYAML was built without libyaml, or the tool moved its reading elsewhere."""
    if not getattr(yaml, "__with_libyaml__", False):
        return []
    switched = []
    for name in READERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(module, "yaml", None) in (yaml, IN_C):
            module.yaml = IN_C  # type: ignore[attr-defined]  # the tool module's own `import yaml`
            switched.append(name)
    return switched

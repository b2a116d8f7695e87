"""AIConfigurator's own YAML files, parsed by libyaml (PyYAML's C parser) instead of PyYAML's Python one.

One search reads the system, version and collection files shipped in the tool's wheel about seven hundred
times, each with `yaml.safe_load`, whose parser is pure Python: on this repository's 2-core machine about an
eighth of a search's CPU. PyYAML's wheels carry libyaml as `CSafeLoader`, which builds the same objects
(the same constructor, only the scanner and parser in C: tests/perf/test_tool_yaml.py loads every YAML file
the tool ships both ways and compares). The tool's reading modules are handed a `yaml` whose safe loading
is the C one; PyYAML itself, and every other module of the process, is left as it is.
"""

from __future__ import annotations

import importlib
from typing import Any

import yaml

# The modules of the tool (the version the perf extra pins) that read its YAML.
READERS = ("aiconfigurator_core.sdk.perf_database", "aiconfigurator_core.sdk.operations.base",
           "aiconfigurator_core.sdk.attention_lanes")


class _SafeLoadingInC:
    """PyYAML as the tool calls it (`yaml.safe_load(f)`, `yaml.load(f, Loader=yaml.SafeLoader)`,
    `except yaml.YAMLError`), with the safe loader in C; every other name is PyYAML's own."""

    SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def safe_load(self, stream: Any) -> Any:
        return yaml.load(stream, Loader=self.SafeLoader)  # noqa: S506  (the safe loader, in C)

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

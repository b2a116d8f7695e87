"""YAML from outside the plane, read within bounds.

PyYAML builds whatever a document describes, and what it costs is not what the document weighs:
1 MiB of 40,000 small mappings kept a CPU busy for 8-18 s, a few hundred bytes of anchors and
aliases ("billion laughs") describe a billion nodes for whatever walks the result, and a plain
scalar such as `1:1:1:...` is a base-60 integer whose digits cost quadratic time (80 KB took 0.6 s,
1 MiB would take minutes). So a document is measured before anything is built from it: its
parser's events are counted (bytes, nodes with every alias counted as the nodes it stands for,
depth), and the count stops at the first limit passed, so refusing costs no more than the limit
allows. Only a document within the limits is then composed and constructed, by the safe loader
(libyaml's when PyYAML has it), with numbers of bounded length.

The caller decides the limits and where this runs: it is plain CPU work, bounded but not free, so
an event loop hands it to a thread (api/services/cluster_checks.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

# libyaml's parser when PyYAML has it: the counting pass reads its events ~20x faster than the
# pure-Python parser produces them.
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class YamlLimits:
    """The most a document may hold. Nodes count scalars, mappings and sequences (keys included),
    and an alias as the nodes it stands for; depth counts the document's root as 1."""

    max_bytes: int
    max_nodes: int
    max_depth: int
    # A number has no reason to be long (an int beyond 2**64 has 20 digits, a float 24 characters),
    # and a long one is where the quadratic base-60 conversion hides.
    max_number_chars: int = 64


class YamlRefused(Exception):
    """A document past a limit (`limit` names it, `bound` is its value) or not YAML at all (`limit`
    is None). Messages never quote the document: it may hold credentials."""

    def __init__(self, message: str, *, limit: str | None = None, bound: int | None = None):
        super().__init__(message)
        self.message, self.limit, self.bound = message, limit, bound


@dataclass
class _Open:
    """A mapping or sequence whose end has not been read yet."""

    anchor: str | None
    level: int        # its own depth
    nodes_before: int  # nodes counted before it
    deepest: int      # the deepest level seen inside it so far


def load(content: bytes | str, limits: YamlLimits) -> Any:
    """The one document in `content`, built only when it is within `limits`; raises YamlRefused."""
    size = len(content.encode() if isinstance(content, str) else content)
    if size > limits.max_bytes:
        raise YamlRefused(f"is over {limits.max_bytes:,} bytes", limit="max_bytes", bound=limits.max_bytes)
    try:
        _measure(content, limits)
        loader = _Loader(content)
        loader.max_number_chars = limits.max_number_chars
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except YamlRefused:
        raise
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        # ValueError covers bad UTF-8 and dates such as 2024-13-45; the parser's own message quotes the
        # text around the problem, so only the type is named.
        raise YamlRefused(f"is not valid YAML ({type(exc).__name__})") from None


def _measure(content: bytes | str, limits: YamlLimits) -> None:
    """Count the parser's events against the limits; raise at the first one passed."""
    nodes = 0
    open_: list[_Open] = []
    anchored: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) of the node it names
    parser = _BASE_LOADER(content)
    try:
        while parser.check_event():
            event = parser.get_event()
            if isinstance(event, yaml.AliasEvent):
                if event.anchor in {o.anchor for o in open_}:
                    # An alias inside the node its anchor names: a recursive document, infinite when walked.
                    raise YamlRefused("has an alias inside the node its anchor names (a recursive document)",
                                      limit="recursive_alias", bound=None)
                if event.anchor not in anchored:
                    raise YamlRefused("is not valid YAML (an alias names no anchor defined before it)")
                weight, height = anchored[event.anchor]
            elif isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
                weight, height = 1, 1
            elif isinstance(event, yaml.CollectionEndEvent):
                done = open_.pop()
                if open_:
                    open_[-1].deepest = max(open_[-1].deepest, done.deepest)
                if done.anchor is not None:
                    anchored[done.anchor] = (nodes - done.nodes_before, done.deepest - done.level + 1)
                continue
            else:  # stream and document marks
                continue
            level = len(open_) + 1
            nodes += weight
            deepest = level + height - 1
            if nodes > limits.max_nodes:
                raise YamlRefused(f"has more than {limits.max_nodes:,} YAML nodes (an alias counts as the nodes "
                                  "it stands for)", limit="max_nodes", bound=limits.max_nodes)
            if deepest > limits.max_depth:
                raise YamlRefused(f"nests deeper than {limits.max_depth} levels", limit="max_depth",
                                  bound=limits.max_depth)
            if open_:
                open_[-1].deepest = max(open_[-1].deepest, deepest)
            if isinstance(event, yaml.CollectionStartEvent):
                open_.append(_Open(event.anchor, level, nodes - 1, level))
            elif isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
                anchored[event.anchor] = (1, 1)
    finally:
        parser.dispose()


class _Loader(_BASE_LOADER):
    """The safe loader, refusing numbers longer than `max_number_chars` before converting them."""

    max_number_chars = 64

    def construct_bounded_int(self, node: yaml.ScalarNode) -> Any:
        self._short_number(node)
        return self.construct_yaml_int(node)

    def construct_bounded_float(self, node: yaml.ScalarNode) -> Any:
        self._short_number(node)
        return self.construct_yaml_float(node)

    def _short_number(self, node: yaml.ScalarNode) -> None:
        if len(node.value) > self.max_number_chars:
            raise YamlRefused(f"has a number of more than {self.max_number_chars} characters",
                              limit="max_number_chars", bound=self.max_number_chars)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_bounded_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_bounded_float)

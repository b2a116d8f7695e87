"""Hostile kubeconfigs, generated: whatever a registration's kubeconfig holds (wrong types where a
kubeconfig has structure, programs to run, files outside the directory, nesting, alias bombs, long
numbers, hundreds of thousands of nodes, documents that are not mappings or not YAML, as YAML or as
JSON), the API answers a 4xx in its one error shape within 2 s, and never echoes a credential.

Every document drawn here is one the plane must refuse (each strategy breaks something the loader
checks), so any 2xx is a finding too. Against the API as its own process (conftest.py)."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api_guard.test_schema_fuzz import error_shape_problem
from tests.kube_input.conftest import ADMIN
from tests.kube_input.documents import TOKEN, kubeconfig, laughs

MAX_EXAMPLES = 60  # ~0.3 s each: the module stays well under 30 s
ANSWER_BOUND = 2.0

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
not_none = values.filter(lambda v: v is not None)
# A kubeconfig's structure: the whole document, each list, each entry, each section.
SLOTS = [("current-context",), ("contexts",), ("contexts", 0), ("contexts", 0, "context")]


def _put(doc: dict, path: tuple, value: Any) -> dict:
    here: Any = doc
    for step in path[:-1]:
        here = here[step]
    here[path[-1]] = value
    return doc


def _dump(doc: Any, as_json: bool) -> bytes:
    return (json.dumps(doc) if as_json else yaml.safe_dump(doc)).encode()


def _program(plugin: Any, field: str) -> str:
    if not isinstance(plugin, dict):
        return ""
    return Path(str(plugin.get("command") or "")).name if field == "exec" else str(plugin.get("name") or "")


@st.composite
def broken_context(draw) -> bytes:
    """The context the client would use is missing or of the wrong type."""
    slot = draw(st.sampled_from(SLOTS))
    value = draw(values.filter(lambda v: v != "c0" and not (slot == ("contexts",) and isinstance(v, list))
                               and not (slot == ("contexts", 0) and isinstance(v, dict))
                               and not (slot[-1] == "context" and isinstance(v, dict))))
    return _dump(_put(kubeconfig(), slot, value), draw(st.booleans()))


@st.composite
def runs_a_program(draw) -> bytes:
    """The context's user has an exec plugin or an auth-provider (the API's process trusts only `aws`)."""
    field = draw(st.sampled_from(["exec", "auth-provider"]))
    plugin = draw(not_none.filter(lambda p: _program(p, field) != "aws")
                  | st.builds(lambda c: {"command": c, "apiVersion": "v1"}, st.sampled_from(["/bin/sh", "curl", ""])))
    return _dump(_put(kubeconfig(), ("users", 0, "user", field), plugin), draw(st.booleans()))


@st.composite
def names_a_file(draw) -> bytes:
    """A file the kubeconfig names outside the directory, relative, with '..', a NUL or too long a name."""
    section, key = draw(st.sampled_from([("clusters", "certificate-authority"), ("users", "client-certificate"),
                                         ("users", "client-key"), ("users", "tokenFile")]))
    value = draw(not_none.filter(lambda v: not str(v).startswith("/tmp"))
                 | st.sampled_from(["/etc/passwd", "../x", "/a\x00b", "/" + "a" * 300, "/tmp/../etc/shadow"]))
    entry = "cluster" if section == "clusters" else "user"
    return _dump(_put(kubeconfig(), (section, 0, entry, key), value), draw(st.booleans()))


def _inside(extra: str) -> bytes:
    """A valid kubeconfig carrying `extra` (YAML) under a key of its own: only `extra` can be refused."""
    return (yaml.safe_dump(kubeconfig()) + "preferences:\n  x: " + extra + "\n").encode()


past_limits = st.one_of(
    st.integers(33, 990).map(lambda n: _inside("[" * n + "]" * n)),
    st.integers(1_000, 200_000).map(lambda n: _inside("[" * n + "]" * n)),
    st.tuples(st.integers(2, 12), st.integers(5, 12)).filter(lambda t: t[1] ** t[0] > 60_000)
    .map(lambda t: _inside("0") + laughs(t[0], t[1])),
    st.integers(65, 200_000).map(lambda n: _inside("9" * n)),
    st.integers(33, 100_000).map(lambda n: _inside("1" + ":1" * n)),
    st.integers(10_001, 40_000).map(lambda n: _inside("[" + ", ".join(f"{{a: {i}, b: c}}" for i in range(n)) + "]")),
    st.just(_inside("&a [x, *a]")),
)
not_a_kubeconfig = st.one_of(
    values.filter(lambda v: not isinstance(v, dict)).flatmap(lambda v: st.booleans().map(lambda j: _dump(v, j))),
    st.binary(max_size=4096),
    st.just(_dump(kubeconfig(), False) + b"---\n" + _dump(kubeconfig(), False)),
)
hostile = st.one_of(broken_context(), runs_a_program(), names_a_file(), past_limits, not_a_kubeconfig)

_numbers = itertools.count()


@settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(content=hostile)
def test_every_hostile_kubeconfig_gets_a_4xx_in_the_one_error_shape_within_2_s(api_process, content):
    path = api_process.kubeconfigs / f"fuzzed-{next(_numbers)}.yaml"
    path.write_bytes(content)
    started = time.perf_counter()
    r = httpx.post(f"{api_process.url}/v1/clusters", json={"name": "fuzzed", "kubeconfig": f"file:{path}"},
                   headers=ADMIN, timeout=30)
    seconds = time.perf_counter() - started
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    problem = error_shape_problem(r.status_code, r.headers.get("content-type", ""), r.json())
    assert problem is None, problem
    assert r.json()["error"]["details"]["field"] == "kubeconfig", r.text[:500]
    assert TOKEN not in r.text
    assert seconds < ANSWER_BOUND, f"{seconds:.2f} s for {len(content)} bytes"

"""The bounded YAML loader (wingsmith/domain/bounded_yaml.py) and the kubeconfig loader built on it, without
servers: each limit refuses what passes it, names itself, quotes nothing of the document, and costs
no more than the limit allows; documents within the limits load as `yaml.safe_load` loads them."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.kube_input.documents import MIB, TOKEN, deep, fleet, kubeconfig, laughs, small_mappings
from wingsmith.adapters.kube.kubeconfig import (
    MAX_KUBECONFIG_DEPTH,
    MAX_KUBECONFIG_NODES,
    KubeconfigBeyondLimit,
    KubeconfigPolicy,
    load_kubeconfig,
    parse_source,
)
from wingsmith.adapters.kube.kubeconfig_check import check_in_child
from wingsmith.domain.bounded_yaml import YamlLimits, YamlRefused, load

LIMITS = YamlLimits(max_bytes=MIB, max_nodes=MAX_KUBECONFIG_NODES, max_depth=MAX_KUBECONFIG_DEPTH)


def refused(content: bytes | str, limits: YamlLimits = LIMITS) -> YamlRefused:
    with pytest.raises(YamlRefused) as err:
        load(content, limits)
    assert TOKEN not in err.value.message
    return err.value


@pytest.mark.parametrize("content", [
    yaml.safe_dump(kubeconfig(3)), fleet(50), "a: &x {k: [1, 2.5, true, null, 2024-01-02]}\nb: *x\n",
    "base: &b {x: 1}\nother: {<<: *b, y: 2}\n", "1:30", "just a string", "", "port: 0x1F\n",
])
def test_within_the_limits_it_loads_what_safe_load_loads(content):
    assert load(content, LIMITS) == yaml.safe_load(content)


def test_nodes_are_counted_with_every_alias_as_what_it_stands_for():
    small = YamlLimits(max_bytes=MIB, max_nodes=12, max_depth=8)
    assert load("a: &x [1, 2, 3]\nb: *x\n", small) == {"a": [1, 2, 3], "b": [1, 2, 3]}  # 1 + 2 + 4 + 1 + 4 nodes
    err = refused("a: &x [1, 2, 3]\nb: *x\nc: *x\n", small)
    assert (err.limit, err.bound) == ("max_nodes", 12) and "more than 12 YAML nodes" in err.message
    bomb = refused(laughs(9, 9))  # ~500 bytes standing for 9**9 nodes
    assert bomb.limit == "max_nodes"


def test_depth_is_counted_through_aliases_too():
    assert load(deep(MAX_KUBECONFIG_DEPTH - 2, flow=True), LIMITS)
    assert refused(deep(MAX_KUBECONFIG_DEPTH, flow=True)).limit == "max_depth"
    assert refused(deep(MAX_KUBECONFIG_DEPTH, flow=False)).limit == "max_depth"
    nested = "a: &x " + "[" * 20 + "]" * 20 + "\nb: " + "[" * 15 + "*x" + "]" * 15 + "\n"
    assert refused(nested).limit == "max_depth"  # 20 levels, placed 16 deep


def test_a_recursive_alias_is_refused_before_anything_walks_it():
    err = refused("a: &l [x, *l]\n")
    assert err.limit == "recursive_alias"


@pytest.mark.parametrize("number", ["9" * 65, "1" + ":1" * 40_000, "1." + "0" * 100, "0x" + "f" * 100])
def test_long_numbers_are_refused_before_their_conversion(number):
    started = time.process_time()
    err = refused(f"{TOKEN}: {number}\n")
    assert err.limit == "max_number_chars" and err.bound == 64
    assert time.process_time() - started < 0.5  # the base-60 conversion of 40,000 digits alone takes ~0.6 s


@pytest.mark.parametrize("content", [
    b"a: \xc3\x28\n", f"token: [{TOKEN}".encode(), f"a: 1\n---\nb: {TOKEN}\n".encode(), b"? [1]\n: 2\n",
    f"when: 2024-13-45\nt: {TOKEN}\n".encode(), f"!!python/object:os.system {TOKEN}".encode(), b"a: *nowhere\n",
])
def test_what_is_not_yaml_is_refused_by_the_error_type_alone(content):
    err = refused(content)
    assert err.limit is None and err.message.startswith("is not valid YAML")


def test_refusing_1_mib_of_small_mappings_costs_what_the_node_limit_allows():
    hostile = small_mappings(MIB)
    started = time.process_time()
    err = refused(hostile)
    cpu = time.process_time() - started
    assert err.limit == "max_nodes"
    assert cpu < 1.0, f"{cpu:.2f} s of CPU"  # ~0.1 s here; yaml.safe_load took 8 s, 18 s in issue 46


def test_the_byte_limit_comes_first():
    err = refused(b"a: b\n" * 10, YamlLimits(max_bytes=20, max_nodes=10, max_depth=4))
    assert (err.limit, err.bound) == ("max_bytes", 20)


def test_the_kubeconfig_loader_refuses_past_its_limits_not_retryable(tmp_path):
    """What the worker's loader does before it builds a client: the same limits, typed for Temporal."""
    (tmp_path / "mappings.yaml").write_bytes(small_mappings(MIB))
    (tmp_path / "fleet.yaml").write_bytes(fleet(900))  # ~640 KB, a large fleet's: within the limits
    policy = KubeconfigPolicy(directory=tmp_path, exec_allow=frozenset({"aws"}))
    with pytest.raises(KubeconfigBeyondLimit) as err:
        load_kubeconfig(f"file:{tmp_path}/mappings.yaml", None, policy)
    assert err.value.type == "KubeconfigTooComplex" and not err.value.retryable
    assert (err.value.limit, err.value.bound) == ("max_nodes", MAX_KUBECONFIG_NODES)
    assert str(tmp_path / "mappings.yaml") in err.value.message
    config, context = load_kubeconfig(f"file:{tmp_path}/fleet.yaml", None, policy)
    assert context == "c0" and len(config["clusters"]) == 900


def test_the_check_in_a_child_process_answers_like_the_loader_and_is_killed_at_its_deadline(tmp_path):
    policy = KubeconfigPolicy(directory=tmp_path)
    source = parse_source(f"file:{tmp_path}/k.yaml")
    assert check_in_child(yaml.safe_dump(kubeconfig()).encode(), None, policy, source) == "c0"
    with pytest.raises(KubeconfigBeyondLimit) as err:
        check_in_child(laughs(), None, policy, source)
    assert err.value.limit == "max_nodes"
    with pytest.raises(KubeconfigBeyondLimit) as err:
        check_in_child(fleet(900), None, policy, source, seconds=0.001)
    assert (err.value.limit, err.value.type) == ("max_seconds", "KubeconfigTooComplex")

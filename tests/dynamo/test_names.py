import re

import pytest

from wingsmith.domain.dynamo.names import dgd_name, dns1123, label_value

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize(("workload", "cluster", "expected"), [
    ("kimi-k3-chat", "sim-east", "kimi-k3-chat-sim-east"),
    ("w1", "sim-nvl", "w1-sim-nvl"),
])
def test_clean_ids_are_kept_readable(workload, cluster, expected):
    assert dgd_name(workload, cluster) == expected


@pytest.mark.parametrize(("workload", "cluster"), [
    ("Kimi_K3/Prod", "sim-east"),
    ("x" * 80, "sim-west"),
    ("a" * 62, "b"),
    ("--weird--", "CLUSTER.one"),
    ("é", "c"),
])
def test_every_name_is_a_dns1123_label_of_at_most_63(workload, cluster):
    name = dgd_name(workload, cluster)
    assert len(name) <= 63 and DNS1123.match(name)
    assert name == dgd_name(workload, cluster)  # stable


def test_rewritten_ids_do_not_collide():
    names = {dgd_name(w, "sim-east") for w in ["Team_A", "team-a", "TEAM.A", "team a", "x" * 70, "x" * 71]}
    assert len(names) == 6


def test_truncated_names_keep_a_readable_prefix_and_a_hash():
    name = dgd_name("deepseek-v3-" + "long-" * 20, "sim-west")
    assert name.startswith("deepseek-v3-long-") and re.search(r"-[0-9a-f]{8}$", name)


@pytest.mark.parametrize("bad", [("", "c"), ("w", "")])
def test_empty_ids_are_refused(bad):
    with pytest.raises(ValueError, match="needs both"):
        dgd_name(*bad)


def test_label_values():
    assert label_value("Qwen3_8B.v1") == "Qwen3_8B.v1"
    rewritten = label_value("team/a b")
    assert rewritten != "team/a b" and len(rewritten) <= 63 and DNS1123.match(rewritten)
    with pytest.raises(ValueError):
        dns1123("")

"""Kubeconfigs, real and hostile, as bytes."""

from __future__ import annotations

from functools import lru_cache

import yaml

MIB = 1 << 20
TOKEN = "s3cr3t-token-never-echoed"


def kubeconfig(clusters: int = 1, *, token: str = TOKEN) -> dict:
    """A well-formed kubeconfig of `clusters` clusters, each with its context and a token user."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c0",
            "clusters": [{"name": f"k{i}", "cluster": {"server": f"https://10.0.{i % 250}.1:6443"}}
                         for i in range(clusters)],
            "contexts": [{"name": f"c{i}", "context": {"cluster": f"k{i}", "user": f"u{i}", "namespace": "dynamo"}}
                         for i in range(clusters)],
            "users": [{"name": f"u{i}", "user": {"token": token}} for i in range(clusters)]}


@lru_cache(maxsize=4)
def small_mappings(size: int = MIB) -> bytes:
    """The attack of issue 46: a valid kubeconfig followed by ~40,000 small mappings, `size` bytes."""
    head = yaml.safe_dump(kubeconfig()).replace("clusters:\n", "clusters:\n", 1)
    parts, total, i = [head, "extensions:\n"], 0, 0
    total = sum(len(p) for p in parts)
    while total < size - 32:
        line = f"- {{name: e{i}, v: {i}}}\n"
        parts.append(line)
        total += len(line)
        i += 1
    return "".join(parts).encode().ljust(size, b"\n")[:size]


@lru_cache(maxsize=4)
def fleet(clusters: int) -> bytes:
    """A large fleet's kubeconfig as kubectl writes it: each cluster with a CA, each user an exec plugin
    (aws eks get-token) with its arguments, the heaviest common shape in YAML nodes."""
    doc = kubeconfig(clusters)
    for i, (cluster, user) in enumerate(zip(doc["clusters"], doc["users"], strict=True)):
        cluster["cluster"]["certificate-authority-data"] = "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2sx" * 4
        user["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                                 "args": ["--region", "us-east-1", "eks", "get-token", "--cluster-name", f"k{i}"],
                                 "env": [{"name": "AWS_PROFILE", "value": "fleet"}], "interactiveMode": "Never",
                                 "provideClusterInfo": False}}
    return yaml.safe_dump(doc).encode()


def laughs(levels: int = 9, fanout: int = 9) -> bytes:
    """Billion laughs: a few hundred bytes standing for fanout**levels nodes."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * fanout)}]"]
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * fanout)}]" for n in range(1, levels)]
    return ("\n".join(lines) + "\n").encode()


def deep(levels: int, *, flow: bool = True) -> bytes:
    if flow:
        return ("x: " + "[" * levels + "]" * levels + "\n").encode()
    return ("x:\n" + "".join("  " * n + "- \n" for n in range(1, levels)) + "  " * levels + "v\n").encode()

"""Deterministic Kubernetes names, labels and annotations for a rollout.

A retried activity must address the same object, so every name is a pure function of the workload
and the cluster. Kubernetes names are DNS-1123 labels (lower-case alphanumerics and '-', at most 63
characters); ids that need rewriting or shortening get a stable hash suffix so two different ids
never collapse onto one object.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 63
_HASH_LEN = 8
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# Keys Wingsmith writes on every object it owns.
DOMAIN = "wingsmith.dev"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_WORKLOAD = f"{DOMAIN}/workload"
LABEL_CLUSTER = f"{DOMAIN}/cluster"
LABEL_ARTIFACT_SHA = f"{DOMAIN}/artifact-sha"
LABEL_DRAFT_VERSION = f"{DOMAIN}/draft-version"
ANNOTATION_REVISION = f"{DOMAIN}/revision"
# The label the Dynamo operator puts on every pod of a graph deployment.
DYNAMO_GRAPH_LABEL = "nvidia.com/dynamo-graph-deployment-name"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:_HASH_LEN]


def dns1123(raw: str, *, max_len: int = MAX_NAME, salt: str | None = None) -> str:
    """`raw` as a DNS-1123 label; rewritten or over-long values get a hash of the original."""
    if not raw:
        raise ValueError("a Kubernetes name needs a non-empty id")
    clean = re.sub(r"[^a-z0-9-]+", "-", raw.lower())
    clean = re.sub(r"-{2,}", "-", clean).strip("-")
    if clean == raw and len(clean) <= max_len:
        return clean
    suffix = _digest(salt or "", raw)
    head = clean[: max_len - _HASH_LEN - 1].rstrip("-")
    return f"{head}-{suffix}" if head else suffix


def dgd_name(workload_id: str, cluster: str, revision: int = 0) -> str:
    """The DynamoGraphDeployment name of one workload on one cluster. An upgrade brings the new
    version up beside the old one under its own name: revision n > 0 adds `-r<n>` (the first
    version keeps the name it always had, so deployments made before upgrades existed stay found)."""
    if not workload_id or not cluster:
        raise ValueError("dgd_name needs both a workload id and a cluster name")
    if revision < 0:
        raise ValueError("a revision is 0 or more")
    raw = f"{workload_id}-{cluster}" + (f"-r{revision}" if revision else "")
    # Salting with the pair keeps ("a-b", "c") and ("a", "b-c") apart once a hash is added.
    salt = f"{workload_id}\x00{cluster}" + (f"\x00{revision}" if revision else "")
    return dns1123(raw, salt=salt)


def label_value(raw: str) -> str:
    """`raw` if Kubernetes accepts it as a label value, else a stable rewrite with a hash."""
    if len(raw) <= MAX_NAME and _LABEL_VALUE.match(raw):
        return raw
    return dns1123(raw)

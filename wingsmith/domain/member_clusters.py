"""What a member cluster needs before it takes replicas, and the checklist that says whether it has it.

Pure: the permissions the plane uses on a member cluster (the one list: the preflight asks the cluster
about each with a `SelfSubjectAccessReview`, and `rbac_manifests` prints it as the Role and ClusterRole a
platform team applies; docs/member-clusters.md prints that output and tests/member_clusters checks the
two are equal), the CRDs and versions the plane renders, and the checklist a preflight answers
(`Preflight`), with whether it keeps the cluster from taking replicas. The checks themselves talk to
the cluster, so they run in the kube worker (wingsmith/adapters/kube/preflight.py), never in the API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from wingsmith.domain.dynamo.render import GROUP as DGD_GROUP
from wingsmith.domain.dynamo.render import PLURAL as DGD_PLURAL
from wingsmith.domain.dynamo.render import VERSION as DGD_VERSION
from wingsmith.domain.text import MAX_LIST

Scope = Literal["namespace", "cluster"]


class PlanePermission(BaseModel, frozen=True):
    """Verbs the plane's user needs on one resource, in the deploy namespace or across the cluster."""
    group: str = Field(description="API group ('' for the core group)")
    resource: str
    verbs: tuple[str, ...]
    scope: Scope
    names: tuple[str, ...] = Field(default=(), description="only these objects (RBAC resourceNames)")
    why: str

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


# The Secret the plane asks about is named by a setting (WINGSMITH_HF_TOKEN_SECRET); this stands for it.
HF_TOKEN_SECRET_NAME = "{hf_token_secret}"

# Every verb the plane uses on a member cluster: rollouts, the watch, inventories and this preflight.
# Keep it equal to what the code does: a verb missing here is a rollout that fails with 403 on a cluster
# whose preflight passed; one too many is more than a platform team need grant.
PLANE_PERMISSIONS: tuple[PlanePermission, ...] = (
    PlanePermission(group=DGD_GROUP, resource=DGD_PLURAL, verbs=("get", "list", "create", "patch", "delete"),
                    scope="namespace", why="rollouts apply (server-side apply: create and patch), read, list "
                                           "(the watch) and delete the workloads' DynamoGraphDeployments"),
    PlanePermission(group="", resource="pods", verbs=("list",), scope="cluster",
                    why="free GPUs per node (every pod that holds GPUs, whoever owns it), crash loops of a "
                        "deployment's pods, whether the Dynamo operator runs"),
    PlanePermission(group="", resource="nodes", verbs=("list",), scope="cluster",
                    why="GPU nodes: card (nvidia.com/gpu.product), allocatable GPUs, schedulable"),
    PlanePermission(group="", resource="namespaces", verbs=("get",), scope="cluster",
                    why="preflight: the deploy namespace exists"),
    PlanePermission(group="apiextensions.k8s.io", resource="customresourcedefinitions", verbs=("get",),
                    scope="cluster", names=(f"{DGD_PLURAL}.{DGD_GROUP}",),
                    why="preflight: the Dynamo CRDs are installed and serve the version the plane renders"),
    PlanePermission(group="", resource="secrets", verbs=("get",), scope="namespace", names=(HF_TOKEN_SECRET_NAME,),
                    why="preflight: the Hub token Secret exists (read as metadata only, never its value)"),
)


def permissions(hf_token_secret: str | None) -> list[PlanePermission]:
    """The plane's permissions with the Hub token Secret's name filled in (none asked when there is none)."""
    out = []
    for permission in PLANE_PERMISSIONS:
        if HF_TOKEN_SECRET_NAME in permission.names:
            if not hf_token_secret:
                continue
            permission = permission.model_copy(update={"names": tuple(
                hf_token_secret if n == HF_TOKEN_SECRET_NAME else n for n in permission.names)})
        out.append(permission)
    return out


RBAC_NAME = "wingsmith-plane"


def rbac_manifests(namespace: str = "default", hf_token_secret: str | None = "hf-token",
                   user: str = "wingsmith-plane") -> list[dict[str, Any]]:
    """The plane's permissions as Kubernetes RBAC: a Role in the deploy namespace, a ClusterRole for what
    lies across the cluster, each bound to the plane's user (the kubeconfig's user name, or a
    ServiceAccount's `system:serviceaccount:<ns>:<name>`)."""
    def rules(scope: Scope) -> list[dict[str, Any]]:
        out = []
        for p in permissions(hf_token_secret):
            if p.scope == scope:
                rule: dict[str, Any] = {"apiGroups": [p.group], "resources": [p.resource], "verbs": list(p.verbs)}
                if p.names:
                    rule["resourceNames"] = list(p.names)
                out.append(rule)
        return out

    subject = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": rbac, "kind": "Role", "metadata": {"name": RBAC_NAME, "namespace": namespace},
         "rules": rules("namespace")},
        {"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": RBAC_NAME, "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RBAC_NAME},
         "subjects": [subject]},
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": RBAC_NAME}, "rules": rules("cluster")},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": RBAC_NAME},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RBAC_NAME},
         "subjects": [subject]},
    ]


class RequiredCrd(BaseModel, frozen=True):
    name: str
    kind: str
    version: str = Field(description="the version the plane renders and reads; the CRD must serve it")


REQUIRED_CRDS: tuple[RequiredCrd, ...] = (
    RequiredCrd(name=f"{DGD_PLURAL}.{DGD_GROUP}", kind="DynamoGraphDeployment", version=DGD_VERSION),
)
# The Dynamo release whose operator and CRDs the plane renders for (its default runtime image is the same
# release's vllm-runtime); a platform team installs the operator of this release or a later 1.x.
DYNAMO_RELEASE = "1.3.0"
OPERATOR_SELECTOR = "app.kubernetes.io/name=dynamo-operator"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GUIDE = "docs/member-clusters.md"


# --- the checklist -------------------------------------------------------------------------------------

CheckStatus = Literal["pass", "fail", "warn"]


class CheckLine(BaseModel):
    check: str = Field(max_length=100, description="what was checked: api_server, dynamo_crds, dynamo_operator, "
                                                   "permissions, permission:<resource>, namespace, "
                                                   "hub_token_secret, gpu_nodes")
    status: CheckStatus
    detail: str = Field(max_length=2000, description="what was found")
    fix: str = Field(default="", max_length=2000, description="what to do (a failing or warning line)")

    def text(self) -> str:
        return f"{self.status.upper():4} {self.check}: {self.detail}" + (f" — fix: {self.fix}" if self.fix else "")


class Preflight(BaseModel):
    """A cluster's checklist, as its last check answered it."""
    checked_at: datetime
    lines: list[CheckLine] = Field(max_length=MAX_LIST)

    @property
    def passed(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> list[CheckLine]:
        return [line for line in self.lines if line.status == "fail"]

    def unplaceable_reason(self) -> str | None:
        """Why placement leaves the cluster out (None: it may take replicas): the failing checks, each
        with what was found; the fixes are on the checklist."""
        failed = self.failed
        if not failed:
            return None
        words = "; ".join(f"{line.check}: {line.detail}" for line in failed)
        if len(words) > 600:
            words = words[:599] + "…"
        return f"its preflight check failed ({words}); `wingsmith clusters check` shows the fixes"


class PreflightRun(BaseModel):
    """What a request to check a cluster got: the checklist, or why it could not be run (then the cluster's
    last checklist, if any, stays as it was: a check that did not happen says nothing about the cluster)."""
    preflight: Preflight | None = None
    not_run: str | None = Field(default=None, description="why no check ran (no worker, no answer in time)")

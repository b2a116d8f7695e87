"""Who may do what on a simulated cluster: the Role its kubeconfig's user holds, enforced on every
request and answered by `SelfSubjectAccessReview` (authorization.k8s.io/v1), as a real API server's
RBAC authorizer answers both.

A cluster's setup (`ClusterSetup.role`) holds the rules; None means the user is bound to
`cluster-admin`, as the default simulated clusters' user is. The rules are read as a ClusterRole bound
to the user: they hold in every namespace (a simplification: a real Role holds only in its own).
Discovery (`/version`, `/api`, `/apis`) and access reviews themselves are open to every authenticated
user, as the `system:discovery` and `system:basic-user` roles make them on a real cluster.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sim.kube import errors


class PolicyRule(BaseModel):
    """One rule of a Role, as `rbac.authorization.k8s.io/v1` spells it (`*` matches anything)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    api_groups: list[str] = Field(default_factory=list, alias="apiGroups")
    resources: list[str] = Field(default_factory=list)
    verbs: list[str] = Field(default_factory=list)
    resource_names: list[str] = Field(default_factory=list, alias="resourceNames")

    def allows(self, verb: str, group: str, resource: str, name: str | None) -> bool:
        return ((verb in self.verbs or "*" in self.verbs)
                and (group in self.api_groups or "*" in self.api_groups)
                and (resource in self.resources or "*" in self.resources)
                and (not self.resource_names or (name is not None and name in self.resource_names)))


def allowed(rules: list[PolicyRule] | None, verb: str, group: str, resource: str, name: str | None) -> bool:
    """Whether the rules let the user do `verb` on `resource` (with its subresource as `pods/status`)."""
    if rules is None:
        return True
    return any(rule.allows(verb, group, resource, name) for rule in rules)


def verb_of(method: str, name: str | None, query: dict[str, str]) -> str:
    """The RBAC verb of a request, as the API server's request-info resolver names it."""
    if method == "GET":
        if query.get("watch") in ("true", "1"):
            return "watch"
        return "get" if name else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete" if name else "deletecollection"
            }.get(method, method.lower())


def forbidden(verb: str, group: str, resource: str, namespace: str | None, name: str | None,
              user: str) -> errors.KubeError:
    what = f'resource "{resource}" in API group "{group}"'
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    named = f' "{name}"' if name else ""
    return errors.KubeError(403, "Forbidden", f'{resource}{named} is forbidden: User "{user}" cannot {verb} '
                                              f"{what}{where}")


def access_review(rules: list[PolicyRule] | None, body: dict[str, Any], user: str) -> dict[str, Any]:
    """The answer to a `SelfSubjectAccessReview`: its spec back, with `status.allowed` (and a reason)."""
    spec = body.get("spec") if isinstance(body, dict) else None
    attributes = (spec or {}).get("resourceAttributes")
    if not isinstance(attributes, dict):
        if isinstance((spec or {}).get("nonResourceAttributes"), dict):
            status: dict[str, Any] = {"allowed": True, "reason": "non-resource URLs are open to every user"}
            return _review(body, status)
        raise errors.invalid("SelfSubjectAccessReview.authorization.k8s.io", "", [{
            "reason": "FieldValueRequired", "field": "spec.resourceAttributes",
            "message": "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified"}])
    verb, group = str(attributes.get("verb") or ""), str(attributes.get("group") or "")
    resource = str(attributes.get("resource") or "")
    if attributes.get("subresource"):
        resource = f"{resource}/{attributes['subresource']}"
    name = attributes.get("name") or None
    if allowed(rules, verb, group, resource, name):
        reason = ("RBAC: allowed by ClusterRoleBinding \"cluster-admin\"" if rules is None
                  else "RBAC: allowed by the simulated cluster's Role")
        status = {"allowed": True, "reason": reason}
    else:
        status = {"allowed": False, "reason": f'RBAC: user "{user}" may not {verb} {resource or "*"}'
                                              f'{" " + name if name else ""} in API group "{group}"'}
    return _review(body, status)


def _review(body: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": body.get("spec") or {}, "status": status}

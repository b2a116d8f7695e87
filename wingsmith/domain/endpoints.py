"""Endpoints: one model name for clients, routed by the gateway to the deployments of its workloads
that really serve it. The pure rules live here (which deployments become backends, with what
weight), together with the messages the workload and endpoint workflows send each other.

A backend is one workload's deployment on one cluster, named by a typed `BackendRef`; its gateway
id (`<cluster>/<workload>`, and `<cluster>/<workload>/r<n>` for a version an upgrade brought up) is
derived from it in one place. While an upgrade shifts traffic on a cluster, the two versions there
share that cluster's weight by an explicit split (percent to the new one) instead of by replicas.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from wingsmith.domain.gateway.routes import Backend, EndpointRoutes


class BackendRef(BaseModel):
    """One workload's deployment on one cluster, as an endpoint routes to it."""

    model_config = ConfigDict(frozen=True)

    cluster: str
    workload_id: str
    revision: int = Field(default=0, ge=0, description="which version on that cluster (see `dgd_name`)")

    @property
    def id(self) -> str:
        """The gateway's backend id (`Backend.id`)."""
        return f"{self.cluster}/{self.workload_id}" + (f"/r{self.revision}" if self.revision else "")

    @classmethod
    def of(cls, backend: Backend) -> BackendRef:
        """The ref a routed backend was made from (its id carries the revision)."""
        base = f"{backend.cluster}/{backend.workload_id}"
        tail = backend.id[len(base):]
        revision = int(tail[2:]) if tail.startswith("/r") and tail[2:].isdigit() else 0
        return cls(cluster=backend.cluster, workload_id=backend.workload_id, revision=revision)


class ServingDeployment(BaseModel):
    """A deployment the registry records as serving, with its frontend."""

    workload_id: str
    cluster: str
    replicas: int
    frontend_url: str
    served_model_name: str | None
    revision: int = 0
    split_percent: int | None = Field(default=None, ge=0, le=100, description="set while an upgrade shifts traffic "
                                      "on this cluster: this version's percent of the workload's traffic there")

    @property
    def ref(self) -> BackendRef:
        return BackendRef(cluster=self.cluster, workload_id=self.workload_id, revision=self.revision)


def backend_weight(replicas: int, leaving: bool) -> int:
    """Traffic follows replicas; a backend that is leaving (its workload deleted or removed from the
    endpoint, or its cluster scaled away) keeps its route at weight 0 so in-flight requests finish."""
    return 0 if leaving else max(1, replicas)


def routes_from_deployments(name: str, deployments: list[ServingDeployment], listing: list[bool], *,
                            draining_workloads: list[str], draining_backends: list[BackendRef]) -> EndpointRoutes:
    """The endpoint's routes: the deployments whose frontend lists the served name right now
    (`listing`, one answer per deployment), weighted by replicas, leaving ones at weight 0. A
    cluster under a traffic split gives each version its percent of that cluster's replica weight;
    every weight is then scaled by the smallest factor that keeps those percents whole."""
    scale = _split_scale([d.split_percent for d in deployments if d.split_percent is not None])
    backends = []
    for d, lists in zip(deployments, listing, strict=True):
        if not lists:
            continue
        leaving = d.workload_id in draining_workloads or d.ref in draining_backends
        weight = backend_weight(d.replicas, leaving) * scale
        if d.split_percent is not None and not leaving:
            weight = weight * d.split_percent // 100
        backends.append(Backend(id=d.ref.id, cluster=d.cluster, workload_id=d.workload_id, url=d.frontend_url,
                                weight=min(weight, MAX_WEIGHT),
                                served_model=d.served_model_name if d.served_model_name != name else None))
    return EndpointRoutes(model_name=name, backends=backends)


MAX_WEIGHT = 10_000  # the gateway's limit on one backend's weight


def _split_scale(percents: list[int]) -> int:
    """1 without splits; else the least factor f with f * p / 100 whole for every split percent p
    (10 % → 10, 50 % → 2, both → 10), so a split of a one-replica cluster still has weights 1 : 9."""
    scale = 1
    for p in percents:
        need = 100 // math.gcd(p, 100)
        scale = scale * need // math.gcd(scale, need)
    return scale


# --- what the workload and endpoint workflows tell each other (typed signals) ---------------------

class EndpointRef(BaseModel):
    """From an endpoint to a workload: `subscribe`, `unsubscribe`, `drained`."""

    endpoint_workflow_id: str


class WorkloadRef(BaseModel):
    """From a workload to its endpoints: `workload_changed`, `workload_deleting`."""

    workload_id: str


class BackendDrained(BaseModel):
    """From an endpoint to a workload: it no longer routes to this backend (`backend_drained`)."""

    endpoint_workflow_id: str
    backend: BackendRef = Field(description="the cluster the workload is scaling away from")


# --- which workloads an endpoint may route to -------------------------------------------------------

class WorkloadFacts(BaseModel):
    """What the registry says about a workload an endpoint is asked to route to."""

    workload_id: str
    state: str
    served_model_name: str | None
    repo_id: str


NOT_SERVING_STATES = frozenset({"deleting", "deleted", "failed"})


def endpoint_model(facts: dict[str, WorkloadFacts], workloads: list[str]) -> str | None:
    """The model an endpoint serves: the Hugging Face repository of its workloads (lower-cased, as the
    Hub ignores case), or None when none of them is known to the registry."""
    return next((facts[w].repo_id.lower() for w in workloads if w in facts), None)


def membership_problems(name: str, wanted: list[str], facts: dict[str, WorkloadFacts],
                        model: str | None) -> list[str]:
    """Why these workloads cannot be the endpoint `name`'s (empty when they can). Each must exist and
    not be going away, and all must serve the endpoint's `model` (a Hugging Face repository, any
    commit of it): clients ask for `name` and must get that model whichever workload answers. A new
    endpoint (`model` None) takes the model its workloads agree on.

    The served model name is not evidence: it is a label the workload's creator picks, so a workload
    of another model named after the endpoint would swap the model behind it."""
    if not wanted:
        return ["an endpoint needs at least one workload"]
    problems = []
    missing = [w for w in wanted if w not in facts]
    if missing:
        problems.append(f"unknown workload(s): {', '.join(missing)}")
    gone = [w for w in wanted if w in facts and facts[w].state in NOT_SERVING_STATES]
    if gone:
        problems.append(f"workload(s) {', '.join(gone)} no longer serve")
    known = [w for w in wanted if w in facts]
    if model is None:
        repos = sorted({facts[w].repo_id.lower() for w in known})
        if len(repos) > 1:
            problems.append(f"the workloads serve different models ({', '.join(repos)}); an endpoint serves one "
                            "model, so every workload must serve the same Hugging Face repository")
    else:
        strangers = [w for w in known if facts[w].repo_id.lower() != model.lower()]
        if strangers:
            theirs = ", ".join(f"{w} serves {facts[w].repo_id}" for w in strangers)
            problems.append(f"endpoint {name} serves {model}; every workload it routes to must serve that model "
                            f"({theirs}): create another endpoint for another model")
    return problems

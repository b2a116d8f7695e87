"""Endpoints: one model name for clients, routed by the gateway to the deployments of its workloads
that really serve it. The pure rules live here (which deployments become backends, with what
weight), together with the messages the workload and endpoint workflows send each other.

A backend is one workload's deployment on one cluster, named by a typed `BackendRef`; its gateway
id (`<cluster>/<workload>`) is derived from it in one place.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from wingsmith.gateway import Backend, EndpointRoutes


class BackendRef(BaseModel):
    """One workload's deployment on one cluster, as an endpoint routes to it."""

    model_config = ConfigDict(frozen=True)

    cluster: str
    workload_id: str

    @property
    def id(self) -> str:
        """The gateway's backend id (`Backend.id`)."""
        return f"{self.cluster}/{self.workload_id}"


class ServingDeployment(BaseModel):
    """A deployment the registry records as serving, with its frontend."""

    workload_id: str
    cluster: str
    replicas: int
    frontend_url: str
    served_model_name: str | None

    @property
    def ref(self) -> BackendRef:
        return BackendRef(cluster=self.cluster, workload_id=self.workload_id)


def backend_weight(replicas: int, leaving: bool) -> int:
    """Traffic follows replicas; a backend that is leaving (its workload deleted or removed from the
    endpoint, or its cluster scaled away) keeps its route at weight 0 so in-flight requests finish."""
    return 0 if leaving else max(1, replicas)


def routes_from_deployments(name: str, deployments: list[ServingDeployment], listing: list[bool], *,
                            draining_workloads: list[str], draining_backends: list[BackendRef]) -> EndpointRoutes:
    """The endpoint's routes: the deployments whose frontend lists the served name right now
    (`listing`, one answer per deployment), weighted by replicas, leaving ones at weight 0."""
    backends = []
    for d, lists in zip(deployments, listing, strict=True):
        if not lists:
            continue
        leaving = d.workload_id in draining_workloads or d.ref in draining_backends
        backends.append(Backend(id=d.ref.id, cluster=d.cluster, workload_id=d.workload_id, url=d.frontend_url,
                                weight=backend_weight(d.replicas, leaving),
                                served_model=d.served_model_name if d.served_model_name != name else None))
    return EndpointRoutes(model_name=name, backends=backends)


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


def membership_problems(name: str, wanted: list[str], facts: dict[str, WorkloadFacts],
                        staying: list[str]) -> list[str]:
    """Why these workloads cannot be the endpoint `name`'s (empty when they can). Each must exist and
    not be going away; a workload joining an endpoint that already routes others must serve the name:
    its served model name is `name`, or it serves the same Hugging Face repository as one that stays
    (the gateway then asks it for its own name, as for a newer commit of the same model)."""
    if not wanted:
        return ["an endpoint needs at least one workload"]
    problems = []
    missing = [w for w in wanted if w not in facts]
    if missing:
        problems.append(f"unknown workload(s): {', '.join(missing)}")
    gone = [w for w in wanted if w in facts and facts[w].state in NOT_SERVING_STATES]
    if gone:
        problems.append(f"workload(s) {', '.join(gone)} no longer serve")
    repos = {facts[w].repo_id.lower() for w in staying if w in facts}
    if repos:
        strangers = [w for w in wanted if w in facts and w not in staying and facts[w].served_model_name != name
                     and facts[w].repo_id.lower() not in repos]
        if strangers:
            problems.append(f"workload(s) {', '.join(strangers)} serve neither {name!r} nor the model of the "
                            f"endpoint's other workloads ({', '.join(sorted(repos))})")
    return problems

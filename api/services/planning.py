"""Planning: a workload request checked against its approved draft and turned into a plan (from a traffic
target's chosen card when it has one: api/services/target_plans.py), and where a plan's replicas would go
(the placement dry run, writing nothing) over the registered clusters' inventories (manual, live through the
worker, or what-if ones sent with the question)."""

from __future__ import annotations

import asyncpg
from pydantic import BaseModel, Field, field_validator
from temporalio.client import Client

from api.errors import ApiError
from api.responses import DryRun, DryRunResponse
from api.services import quotas
from api.services.inventories import LiveReads
from wingsmith.adapters.recipes.files import catalog_of_draft
from wingsmith.adapters.store import clusters as store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.adapters.store.clusters import ClusterRecord
from wingsmith.domain.config import Settings
from wingsmith.domain.dynamo import render_dgd
from wingsmith.domain.placement import (
    EXPLAIN_EVERY_CLUSTER_UP_TO,
    ClusterInventory,
    PlacementInputError,
    PlacementPlan,
    place,
)
from wingsmith.domain.recipes import Catalog
from wingsmith.domain.target_plan import TargetChoice
from wingsmith.domain.target_workload import plan_first_runnable
from wingsmith.domain.text import MAX_LIST, MAX_POOLS, NameText
from wingsmith.domain.workloads import (
    ApprovedArtifact,
    InvalidWorkload,
    WorkloadPlan,
    WorkloadRequest,
    approved_artifact_from_row,
    plan_workload,
)


class DryRunRequest(BaseModel):
    plan: PlacementPlan
    clusters: list[NameText] | None = Field(default=None, max_length=MAX_LIST,
                                            description="only these registered clusters; default: all")
    inventories: list[ClusterInventory] = Field(
        default_factory=list, max_length=MAX_LIST, description="what-if inventories that replace the clusters' own")
    live: bool = Field(default=True, description="read live inventories of clusters without a manual or "
                                                 "what-if inventory; false: those clusters have none")
    explain: list[NameText] | None = Field(
        default=None, max_length=MAX_LIST,
        description="clusters to explain in full (every filter, every score term) besides those that would "
                    f"receive replicas; default: every cluster on a fleet of up to {EXPLAIN_EVERY_CLUSTER_UP_TO:,} "
                    "clusters, none on a larger one (those are grouped by the first filter they fail)")

    @field_validator("inventories")
    @classmethod
    def _bounded_pools(cls, value: list[ClusterInventory]) -> list[ClusterInventory]:
        for inventory in value:
            if len(inventory.pools) > MAX_POOLS:
                raise ValueError(f"inventory of {inventory.cluster} has {len(inventory.pools)} pools; "
                                 f"at most {MAX_POOLS} per cluster")
        return value


async def dry_run(body: DryRunRequest, *, db: asyncpg.Pool, temporal: Client | None, settings: Settings,
                  live_reads: LiveReads) -> DryRunResponse:
    """The placement decision for a plan, and the inventories it used."""
    records = await store.list_clusters(db)
    if body.clusters is not None:
        known = {r.name for r in records}
        unknown = sorted(set(body.clusters) - known)
        if unknown:
            raise ApiError(404, f"unknown cluster(s): {', '.join(unknown)}", details={"unknown": unknown})
        records = [r for r in records if r.name in set(body.clusters)]
    given = {inv.cluster for inv in body.inventories}
    inventories = list(body.inventories)
    live = []
    for record in records:
        if record.name in given:
            continue
        if record.manual_inventory is not None:
            inventories.append(record.manual_inventory.to_inventory(record.name))
        elif body.live:
            live.append(record)
    inventories += await live_reads.inventories(temporal, settings, live)
    try:
        decision = place(body.plan, inventories, [r.info() for r in records],
                         explain=_explained(body, records, inventories))
    except PlacementInputError as exc:
        raise ApiError(422, str(exc)) from None
    return DryRunResponse(decision=decision, inventories=sorted(inventories, key=lambda i: i.cluster))


def _explained(body: DryRunRequest, records: list[ClusterRecord],
               inventories: list[ClusterInventory]) -> bool | list[str]:
    """Which clusters the dry run explains in full: the ones asked for, else every cluster of a small fleet
    (the decisions workflows record explain only the clusters that receive replicas)."""
    fleet = {r.name for r in records} | {i.cluster for i in inventories}
    if body.explain is None:
        return len(fleet) <= EXPLAIN_EVERY_CLUSTER_UP_TO
    unknown = sorted(set(body.explain) - fleet)
    if unknown:
        raise ApiError(404, f"cannot explain unknown cluster(s): {', '.join(unknown)}", details={"unknown": unknown})
    return body.explain


async def approved(body: WorkloadRequest, *, db: asyncpg.Pool, settings: Settings) -> tuple[ApprovedArtifact, Catalog]:
    """The approved artifact the request names and the catalog its draft's evidence came from (its flags are
    what the reviewer saw), or the 422 that says why not."""
    row = await workload_store.approved_artifact(db, body.artifact_id)
    artifact = approved_artifact_from_row(row) if row is not None else None
    try:
        if artifact is None:
            raise InvalidWorkload(f"artifact {body.artifact_id} not found; register it first", field="artifact_id")
        return artifact, catalog_of_draft(artifact.catalog_version, settings.catalogs_dir)
    except InvalidWorkload as exc:
        raise invalid(exc) from None


def invalid(exc: InvalidWorkload) -> ApiError:
    return ApiError(422, str(exc), code="invalid_workload", details={"field": exc.field, **exc.details})


def plan(body: WorkloadRequest, artifact: ApprovedArtifact, catalog: Catalog, choice: TargetChoice | None, *,
         settings: Settings) -> tuple[WorkloadPlan, TargetChoice | None]:
    """The workload's plan: from the traffic target's `choice` when there is one (the first plan, in the
    choice's order, that the recipe and the fit check can run, and the choice as it then stands), else from
    the request's own card, layout and replicas."""
    image, namespace, secret = settings.vllm_runtime_image, settings.deploy_namespace, settings.hf_token_secret
    try:
        if choice is not None:
            return plan_first_runnable(body, choice, artifact, catalog, image=image, namespace=namespace,
                                       hf_token_secret=secret)
        return plan_workload(body, artifact, catalog, image=image, namespace=namespace, hf_token_secret=secret), None
    except InvalidWorkload as exc:
        raise invalid(exc) from None


async def workload_dry_run(planned: WorkloadPlan, choice: TargetChoice | None, *, db: asyncpg.Pool,
                           temporal: Client | None, settings: Settings, live_reads: LiveReads, team: str) -> DryRun:
    """What creating the planned workload would do, writing nothing: its placement, each cluster's graph, and
    whether it fits `team`'s quota (the very judgement the create makes)."""
    placed = await dry_run(DryRunRequest(plan=planned.placement), db=db, temporal=temporal, settings=settings,
                           live_reads=live_reads)
    manifests = {cluster: render_dgd(planned.rollout_spec(cluster, n))
                 for cluster, n in placed.decision.replicas.items()}
    fits = await quotas.verdict(team, planned.workload_id, planned.hardware,
                                planned.gpus_per_replica * planned.replicas, db=db)
    return DryRun(plan=planned, placement=placed.decision.model_dump(mode="json"), manifests=manifests,
                  target_plan=choice, quota=fits)


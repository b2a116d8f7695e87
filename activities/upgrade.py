"""Activities of a workload's progressive upgrade: plan the new version from the registry, set a
cluster's traffic split, read the gateway's counters for the two versions, and write the upgrade's
events. Each is idempotent: a plan and a reading are reads, a split and an event are keyed writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.registry import registry_pool
from contracts import upgrade as contract
from wingsmith.adapters.gateway.traffic_reader import metrics_headers
from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.recipes.files import catalog_of_draft
from wingsmith.adapters.store import workloads as store
from wingsmith.domain.config import Settings
from wingsmith.domain.gateway.traffic import BackendCounters, parse_counters
from wingsmith.domain.upgrade import same_repository
from wingsmith.domain.workloads import (
    InvalidWorkload,
    WorkloadPlan,
    WorkloadRequest,
    approved_artifact_from_row,
    check_artifact,
    kept_shape_problem,
    plan_workload,
    replan_sized,
)


def upgrade_request_of(plan: WorkloadPlan, request: contract.UpgradeRequest) -> WorkloadRequest:
    """What the workload was created with, on the new artifact (and any new shape asked for)."""
    return WorkloadRequest(
        artifact_id=request.artifact_id, name=plan.workload_id, engine=plan.engine, hardware=plan.hardware,
        layout=request.layout or plan.layout, replicas=plan.replicas, variant=request.variant or plan.variant,
        features=plan.features if request.features is None else request.features,
        gpus=None if request.layout else plan.gpus_per_replica, constraints=plan.placement.constraints,
        served_model_name=plan.served_model_name, context=int(plan.fit.get("context") or 8192),
        concurrency=int(plan.fit.get("concurrency") or 16), drift=plan.drift, follow=plan.follow)


class UpgradeActivities:
    def __init__(self, settings: Settings, db: asyncpg.Pool | None):
        self.settings = settings
        self.db = db

    def _pool(self) -> asyncpg.Pool:
        return registry_pool(self.db)

    @activity.defn(name=contract.ACTIVITY_PLAN)
    async def plan(self, params: contract.PlanUpgradeInput) -> contract.PlanUpgradeOutput:
        """The new version's plan, checked like a create: the artifact approved and not superseded, of
        the same repository, and the shape still fitting. A refusal is an answer, not an error."""
        current, request = params.current, params.request
        if not same_repository(request.artifact_id, current.artifact_id):
            return contract.PlanUpgradeOutput(kind="OtherRepository", problem=(
                f"{request.artifact_id} is another repository than {current.artifact_id}: an upgrade moves a "
                "workload within its model; create a new workload for another one"))
        if (problem := kept_shape_problem(current, request.layout)) is not None:
            return contract.PlanUpgradeOutput(kind=contract.ARTIFACT_NOT_UPGRADABLE, problem=problem)
        row = await store.approved_artifact(self._pool(), request.artifact_id)
        try:
            artifact = check_artifact(approved_artifact_from_row(row) if row is not None else None,
                                      request.artifact_id)
            catalog = catalog_of_draft(artifact.catalog_version, self.settings.catalogs_dir)
            asked = upgrade_request_of(current, request)
            # A workload sized from a traffic target keeps the configuration AIConfigurator chose for it.
            plan = (replan_sized(current, asked, artifact, catalog) if current.sized_by is not None else
                    plan_workload(asked, artifact, catalog, image=current.image, namespace=current.namespace,
                                  hf_token_secret=current.hf_token_secret, workload_id=current.workload_id))
        except InvalidWorkload as exc:
            return contract.PlanUpgradeOutput(kind="ArtifactNotUpgradable", problem=str(exc))
        if plan.artifact_id == current.artifact_id and not request.changes_shape():
            return contract.PlanUpgradeOutput(kind="SameArtifact",
                                              problem=f"the workload already runs {current.artifact_id}")
        return contract.PlanUpgradeOutput(plan=plan.model_copy(update={"revision": current.revision + 1}))

    @activity.defn(name=contract.ACTIVITY_SET_SPLIT)
    async def set_split(self, params: contract.SplitInput) -> None:
        await store.set_traffic_split(self._pool(), workload_id=params.workload_id, cluster=params.cluster,
                                      revision=params.revision, percent=params.percent)

    @activity.defn(name=contract.ACTIVITY_READ_COUNTERS)
    async def read_counters(self, params: contract.CountersInput) -> contract.CountersOutput:
        """Each backend's cumulative counters at the gateway, summed over the endpoints routing it."""
        url = self.settings.gateway_url.rstrip("/") + "/metrics"
        try:
            async with httpx.AsyncClient(timeout=5, trust_env=False, verify=default_tls(trust_env=False)) as http:
                r = await http.get(url, headers=metrics_headers(self.settings.gateway_admin_token_ref))
        except httpx.HTTPError as err:
            raise ApplicationError(f"the gateway's metrics ({url}) did not answer: {type(err).__name__}",
                                   type="GatewayUnreadable") from None
        if r.status_code != 200:
            raise ApplicationError(f"the gateway's metrics ({url}) answered {r.status_code}", type="GatewayUnreadable")
        return contract.CountersOutput(counters=sum_counters(r.text, params.endpoints, params.backends))

    @activity.defn(name=contract.ACTIVITY_RECORD)
    async def record(self, e: contract.UpgradeEvent) -> None:
        await store.record_upgrade_event(self._pool(), workload_id=e.workload_id, source=e.source, step=e.step,
                                         kind=e.kind, actor=e.actor, detail=e.detail)

    def all(self) -> list[Callable[..., Any]]:
        return [self.plan, self.set_split, self.read_counters, self.record]


def sum_counters(text: str, endpoints: list[str], backends: list[str]) -> dict[str, BackendCounters]:
    """Requests and histograms add up over endpoints; the cooldown counter is per backend already."""
    out = {b: BackendCounters() for b in backends}
    for endpoint in endpoints:
        for backend, c in parse_counters(text, endpoint).items():
            if backend not in out:
                continue
            total = out[backend]
            total.requests += c.requests
            total.failures += c.failures
            total.cooldowns = max(total.cooldowns, c.cooldowns)
            for mine, theirs in ((total.duration, c.duration), (total.first_byte, c.first_byte)):
                for le, n in theirs.items():
                    mine[le] = mine.get(le, 0) + n
    return out

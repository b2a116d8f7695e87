"""Activities of the endpoint workflow: see which deployments of its workloads really serve, and
keep the gateway's routes equal to them. The gateway client is built from settings at call time
(its admin token or kubeconfig is a reference, read then and never passed through a workflow)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.registry import registry_pool
from contracts import endpoint as contract
from wingsmith.adapters.gateway import GatewayClient, GatewayError, gateway_client
from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.store import endpoints as store
from wingsmith.adapters.store.gateway_routes import publish as publish_routes
from wingsmith.domain.config import Settings
from wingsmith.domain.endpoints import endpoint_model, membership_problems, routes_from_deployments
from wingsmith.domain.gateway import EndpointRoutes, RouteStatus

log = get_logger("wingsmith.activities.endpoint")


def _failure(err: GatewayError) -> ApplicationError:
    return ApplicationError(err.message, type=err.type, non_retryable=not err.retryable)


class EndpointActivities:
    def __init__(self, settings: Settings, db: asyncpg.Pool | None):
        self.settings = settings
        self.db = db

    def _pool(self) -> asyncpg.Pool:
        return registry_pool(self.db)

    def _gateway(self) -> GatewayClient:
        try:
            return gateway_client(self.settings)
        except GatewayError as err:
            raise _failure(err) from None

    @activity.defn(name=contract.ACTIVITY_OBSERVE)
    async def observe(self, params: contract.ObserveInput) -> EndpointRoutes:
        """The backends that may take traffic: deployments recorded as serving whose frontend lists the
        served model name right now. Weights follow replicas; draining workloads get weight 0."""
        deployments = await store.serving_deployments(self._pool(), params.workloads)
        async with httpx.AsyncClient(timeout=3, verify=default_tls()) as http:
            # Probed together: one slow frontend must not hold the whole pass past its timeout.
            listing = await asyncio.gather(*(_lists(http, d.frontend_url, d.served_model_name) for d in deployments))
        return routes_from_deployments(params.name, deployments, list(listing), draining_workloads=params.draining,
                                       draining_backends=params.draining_backends)

    @activity.defn(name=contract.ACTIVITY_SET_ROUTES)
    async def set_routes(self, params: contract.SetRoutesInput) -> RouteStatus | None:
        """Publish the routes where every gateway replica pulls them, then push them to the configured
        gateway (the fast path); both are no-ops when already done."""
        # Published first: a gateway that pulls never sees a table older than one it was pushed.
        await publish_routes(self._pool(), params.routes)
        try:
            return await asyncio.to_thread(self._push_routes, params.routes)
        except ApplicationError as err:
            # Where every replica pulls, the published table is what counts: a push target that is
            # down (a replica restarting) only delays the fast path, so retrying would hold the
            # endpoint's pass for nothing. A push the gateway refuses (a wrong token) still fails.
            if not self.settings.gateway_routes_pulled or err.non_retryable:
                raise
            log.warning("gateway push failed; the replicas pull the published table", endpoint=params.routes.model_name,
                        gateway=self.settings.gateway_url, error=err.type)
            return None

    def _push_routes(self, routes: EndpointRoutes) -> RouteStatus | None:
        client = self._gateway()
        try:
            current = client.get_route(routes.model_name)
            if not routes.backends:
                if current is not None:
                    client.delete_routes(routes.model_name)
                return None
            if current != routes:
                client.set_routes(routes)
            return client.status(routes.model_name)
        except GatewayError as err:
            raise _failure(err) from None
        finally:
            client.close()

    @activity.defn(name=contract.ACTIVITY_WAIT_DRAINED)
    def wait_drained(self, params: contract.DrainInput) -> bool:
        """Wait until the backends have no request in flight, at most the grace period. Gateways that
        cannot count in-flight requests (Envoy) wait the whole grace period."""
        client = self._gateway()
        wanted = {b.id for b in params.backends}
        deadline = time.monotonic() + params.grace_seconds
        try:
            while time.monotonic() < deadline:
                activity.heartbeat()
                status = client.status(params.name)
                if status is None:
                    return True
                counts = [b.in_flight for b in status.backends if b.id in wanted]
                if counts and all(c == 0 for c in counts if c is not None) and None not in counts:
                    return True
                if not counts:
                    return True
                time.sleep(0.2)
            return False
        except GatewayError as err:
            raise _failure(err) from None
        finally:
            client.close()

    @activity.defn(name=contract.ACTIVITY_RECORD)
    async def record(self, r: contract.EndpointRecord) -> None:
        await store.upsert_endpoint(self._pool(), name=r.name, workloads=r.workloads, state=r.state,
                                    workflow_id=r.workflow_id, routes=r.routes, step=r.step, event=r.event,
                                    actor=r.actor, team=r.team, requested_by=r.requested_by)

    @activity.defn(name=contract.ACTIVITY_CHECK_WORKLOADS)
    async def check_workloads(self, params: contract.CheckWorkloadsInput) -> contract.CheckWorkloadsOutput:
        """Whether the registry lets these workloads be the endpoint's (a read: safe to retry)."""
        facts = await store.workload_facts(self._pool(), list(dict.fromkeys([*params.workloads, *params.current])))
        model = params.model or endpoint_model(facts, params.current)
        return contract.CheckWorkloadsOutput(problems=membership_problems(params.name, params.workloads, facts, model),
                                    model=model or endpoint_model(facts, params.workloads))

    def all(self) -> list[Callable[..., Any]]:
        return [self.observe, self.set_routes, self.wait_drained, self.record, self.check_workloads]


async def _lists(http: httpx.AsyncClient, base_url: str, served: str | None) -> bool:
    try:
        r = await http.get(base_url.rstrip("/") + "/v1/models")
        return r.status_code == 200 and served in [m.get("id") for m in r.json().get("data", [])]
    except (httpx.HTTPError, ValueError):
        return False

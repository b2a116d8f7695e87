"""Activities of the endpoint workflow: see which deployments of its workloads really serve, and
keep the gateway's routes equal to them. The gateway client is built from settings at call time
(its admin token or kubeconfig is a reference, read then and never passed through a workflow)."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import httpx
from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from wingsmith.config import Settings
from wingsmith.gateway import Backend, EndpointRoutes, GatewayClient, GatewayError, RouteStatus, gateway_client
from wingsmith.store.artifacts import record_event


class ObserveInput(BaseModel):
    name: str
    workloads: list[str]
    draining: list[str] = []
    draining_backends: list[str] = []  # "<cluster>/<workload>": one cluster of a workload scaling away


class SetRoutesInput(BaseModel):
    routes: EndpointRoutes


class DrainInput(BaseModel):
    name: str
    backend_ids: list[str]
    grace_seconds: float


class EndpointRecord(BaseModel):
    name: str
    workloads: list[str]
    state: str
    workflow_id: str
    routes: list[dict]
    step: str


def _failure(err: GatewayError) -> ApplicationError:
    return ApplicationError(err.message, type=err.type, non_retryable=not err.retryable)


class EndpointActivities:
    def __init__(self, settings: Settings, db: asyncpg.Pool | None):
        self.settings = settings
        self.db = db

    @activity.defn(name="endpoint.observe")
    async def observe(self, params: ObserveInput) -> EndpointRoutes:
        """The backends that may take traffic: deployments recorded as serving whose frontend lists the
        served model name right now. Weights follow replicas; draining workloads get weight 0."""
        rows = await self.db.fetch(
            """select d.workload_id, d.cluster, d.replicas, d.frontend_url, w.spec->>'served_model_name' as served
               from deployments d join workloads w on w.id = d.workload_id
               where d.workload_id = any($1::text[]) and d.state = 'serving' and d.frontend_url is not null
               order by d.workload_id, d.cluster""", params.workloads)
        async with httpx.AsyncClient(timeout=3) as http:
            # Probed together: one slow frontend must not hold the whole pass past its timeout.
            listed = await asyncio.gather(*(_lists(http, r["frontend_url"], r["served"]) for r in rows))
        backends = []
        for r, lists in zip(rows, listed):
            if lists:
                backend_id = f"{r['cluster']}/{r['workload_id']}"
                leaving = r["workload_id"] in params.draining or backend_id in params.draining_backends
                backends.append(Backend(
                    id=backend_id, cluster=r["cluster"], workload_id=r["workload_id"],
                    url=r["frontend_url"], weight=0 if leaving else max(1, r["replicas"]),
                    served_model=r["served"] if r["served"] != params.name else None))
        return EndpointRoutes(model_name=params.name, backends=backends)

    @activity.defn(name="endpoint.set_routes")
    def set_routes(self, params: SetRoutesInput) -> RouteStatus | None:
        """Make the gateway hold exactly these routes; a no-op when it already does."""
        client = gateway_client(self.settings)
        try:
            current = client.get_route(params.routes.model_name)
            if not params.routes.backends:
                if current is not None:
                    client.delete_routes(params.routes.model_name)
                return None
            if current != params.routes:
                client.set_routes(params.routes)
            return client.status(params.routes.model_name)
        except GatewayError as err:
            raise _failure(err) from None
        finally:
            client.close()

    @activity.defn(name="endpoint.wait_drained")
    def wait_drained(self, params: DrainInput) -> bool:
        """Wait until the backends have no request in flight, at most the grace period. Gateways that
        cannot count in-flight requests (Envoy) wait the whole grace period."""
        client = gateway_client(self.settings)
        deadline = time.monotonic() + params.grace_seconds
        try:
            while time.monotonic() < deadline:
                activity.heartbeat()
                status = client.status(params.name)
                if status is None:
                    return True
                counts = [b.in_flight for b in status.backends if b.id in params.backend_ids]
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

    @activity.defn(name="endpoint.record")
    async def record(self, r: EndpointRecord) -> None:
        async with self.db.acquire() as conn, conn.transaction():
            await conn.execute(
                """insert into endpoints (name, workloads, state, workflow_id, routes) values ($1, $2, $3, $4, $5)
                   on conflict (name) do update set workloads = excluded.workloads, state = excluded.state,
                       routes = excluded.routes, updated_at = now()""",
                r.name, r.workloads, r.state, r.workflow_id, r.routes)
            await record_event(conn, source=r.workflow_id, step=r.step, subject=r.name, kind=f"endpoint_{r.state}",
                               detail={"backends": [b["id"] for b in r.routes]})

    def all(self) -> list:
        return [self.observe, self.set_routes, self.wait_drained, self.record]


async def _lists(http: httpx.AsyncClient, base_url: str, served: str | None) -> bool:
    try:
        r = await http.get(base_url.rstrip("/") + "/v1/models")
        return r.status_code == 200 and served in [m.get("id") for m in r.json().get("data", [])]
    except (httpx.HTTPError, ValueError):
        return False

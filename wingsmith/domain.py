"""Which modules of wingsmith/ are the pure domain: models and rules that import no I/O library
(no database, Kubernetes, HTTP or Temporal client, no subprocess or socket). Contracts and workflows
may import these and nothing else of wingsmith/; the worker shares them with every workflow run
instead of re-importing them in each sandbox (worker/sandbox.py). The rest of wingsmith/ is adapters
(store, kube, hub, gateway clients, secrets, codec, tracing, the Temporal connection) and entry points
(cli, local). tests/test_layers.py checks both sides: a domain module that imports an I/O library, or
an adapter, fails it."""

from __future__ import annotations

DOMAIN: tuple[str, ...] = (
    "wingsmith.config",  # settings and the task queues' names (read from the environment by the processes)
    "wingsmith.dynamo",  # rendering the DynamoGraphDeployment, its names and readiness rules
    "wingsmith.endpoints",  # which deployments an endpoint routes to, with what weight
    "wingsmith.errors",
    "wingsmith.gateway.routes",  # the route model both gateways take
    "wingsmith.gateway.traffic",  # parsing the gateway's counters (reading them is traffic_reader)
    "wingsmith.hardware",
    "wingsmith.kube_ref",
    "wingsmith.placement",
    "wingsmith.recipes",  # the catalog of upstream recipes shipped with the plane, and the commands they give
    "wingsmith.reconcile",  # the watch's verdicts on what it observed
    "wingsmith.review",
    "wingsmith.roles",
    "wingsmith.sizing",
    "wingsmith.teams",
    "wingsmith.text",
    "wingsmith.upgrade",  # judging an upgrade's traffic
    "wingsmith.watch",  # what a new draft changes
    "wingsmith.workloads",  # planning a workload against its approved draft
)

# Inside a domain package, but adapters: fetching the recipes from upstream (online).
NOT_DOMAIN: tuple[str, ...] = ("wingsmith.recipes.refresh",)

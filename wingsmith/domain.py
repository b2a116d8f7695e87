"""Which modules of wingsmith/ are the pure domain: models and rules that import no I/O library
(no database, Kubernetes, HTTP or Temporal client, no subprocess or socket). Contracts and workflows
may import these and nothing else of wingsmith/; the worker shares them with every workflow run
instead of re-importing them in each sandbox (worker/sandbox.py). The rest of wingsmith/ is adapters
(store, kube, hub, gateway clients, secrets, codec, tracing, the Temporal connection) and entry points
(cli, local). tests/test_layers.py checks both sides: a domain module that imports an I/O library or
an adapter, or reads or writes a file or starts a process itself (`open`, `Path.read_text`, `os.replace`,
...), fails it."""

from __future__ import annotations

DOMAIN: tuple[str, ...] = (
    "wingsmith.config",  # settings and the task queues' names (read from the environment by the processes)
    "wingsmith.drafts",  # a draft's content: evidence, the plane's sizing and warnings
    "wingsmith.draft_performance",  # a draft's expected performance: what to estimate, the rows it shows
    "wingsmith.dynamo",  # rendering the DynamoGraphDeployment, its names and readiness rules
    "wingsmith.endpoints",  # which deployments an endpoint routes to, with what weight
    "wingsmith.errors",
    "wingsmith.gateway.routes",  # the route model both gateways take
    "wingsmith.gateway.traffic",  # parsing the gateway's counters (reading them is traffic_reader)
    "wingsmith.hardware",
    # A resolved commit's facts (the artifact workflow carries them) and what parsing them needs; the
    # Hub client itself (wingsmith.hub.resolver) is an adapter, loaded by the package only on use.
    "wingsmith.hub.config_facts",
    "wingsmith.hub.config_schema",  # the bounded schema every config.json passes first
    "wingsmith.hub.errors",
    "wingsmith.hub.proposal",
    "wingsmith.hub.source",
    "wingsmith.hub.weights",
    "wingsmith.kube_ref",
    "wingsmith.member_clusters",  # what a member cluster needs (the plane's permissions, CRDs) and its checklist
    "wingsmith.perf.cards",  # planning by load: AIConfigurator's names for the cards, estimates, traffic plans
    "wingsmith.perf.estimates",
    "wingsmith.perf.traffic",
    "wingsmith.placement",
    # The catalog of upstream recipes: parsing snapshots (texts in, models out), evidence and the commands
    # recipes give. Reading it from disk and fetching upstream are the adapters below.
    "wingsmith.recipes",
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

# Inside a domain package, but adapters: the catalog on disk (upstream trees read, the shipped catalog
# and stored versions loaded, new ones written), and fetching the recipes from upstream (online).
NOT_DOMAIN: tuple[str, ...] = ("wingsmith.recipes.files", "wingsmith.recipes.refresh")

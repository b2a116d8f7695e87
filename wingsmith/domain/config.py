"""Settings for every Wingsmith process, read from `WINGSMITH_*` environment variables.

`DATABASE_URL` and `TEMPORAL_ADDRESS` keep their conventional unprefixed names so the plane can be
pointed at existing servers the way other tools are. Secrets are never settings: a setting may name
where a secret lives (an env var name or a file), and the code that needs it reads it at call time.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

TASK_QUEUE = "wingsmith"
# Kubernetes calls block; they get their own queue so a slow cluster cannot starve orchestration.
KUBE_TASK_QUEUE = "wingsmith-kube"


def observe_task_queue(kube_task_queue: str) -> str:
    """Where workloads observe their deployments: beside the kube queue, in a worker that holds thousands
    of waiting observations at once, so they never take the slots rollouts need."""
    return f"{kube_task_queue}-observe"


def perf_task_queue(task_queue: str) -> str:
    """Where AIConfigurator's searches run (contracts/perf.py): beside the main queue, polled only by the
    perf worker, which exists only where the `perf` extra is installed."""
    return f"{task_queue}-perf"




SEARCH_ATTRIBUTES = {
    "WingsmithStage": "Keyword",
    "WingsmithModel": "Keyword",
    "WingsmithSha": "Keyword",
    "WingsmithCluster": "KeywordList",
    "WingsmithWorkload": "Keyword",
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WINGSMITH_", extra="ignore")

    home: Path = Field(default=Path(".wingsmith"), description="where local state lives")

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "WINGSMITH_DATABASE_URL"))
    temporal_address: str | None = Field(
        default=None, validation_alias=AliasChoices("TEMPORAL_ADDRESS", "WINGSMITH_TEMPORAL_ADDRESS"))
    temporal_namespace: str = Field(
        default="default", validation_alias=AliasChoices("TEMPORAL_NAMESPACE", "WINGSMITH_TEMPORAL_NAMESPACE"))
    # Unset: http://localhost:<temporal_ui_port>, so moving the port moves every link.
    temporal_ui_url: str = ""
    task_queue: str = TASK_QUEUE
    kube_task_queue: str = KUBE_TASK_QUEUE

    api_host: str = "127.0.0.1"
    api_port: int = 8000
    temporal_port: int = 7233
    temporal_ui_port: int = 8233
    postgres_port: int = 5433
    offline_hub_port: int = 8090
    simulated_clusters_port: int = 8091
    simulated_operator_delay: float = 2.0
    # The API the CLI talks to. Unset: the plane `wingsmith up` recorded in $WINGSMITH_HOME/plane.json,
    # else http://<api_host>:<api_port>.
    api_url: str | None = None
    # Clusters the API must see registered before /readyz answers 200 (`wingsmith up` sets its own).
    expected_clusters: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Task queues a worker must poll before /readyz answers 200: `wingsmith up` sets its workers' queues;
    # unset in production, where the API's readiness does not wait on other Deployments (docs/production.md).
    expected_task_queues: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # JSON object {token: {"name": ..., "roles": [...]}}. Unset: `wingsmith up` makes a local admin.
    auth_tokens: str | None = None

    # Single sign-on (wingsmith/adapters/oidc.py): OpenID Connect ID or access tokens (JWTs) are accepted beside
    # the token table when an issuer is set. Unset JWKS URL: found by discovery from
    # <issuer>/.well-known/openid-configuration. Claims may be dotted paths ("realm_access.roles").
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_jwks_url: str | None = None
    oidc_algorithms: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["RS256", "PS256", "ES256",
                                                                                      "EdDSA"])
    oidc_name_claim: str = "preferred_username"  # falls back to `sub` when absent
    oidc_roles_claim: str = "roles"
    oidc_team_claim: str = "team"
    oidc_leeway_seconds: int = Field(default=30, ge=0, le=300)
    # An unknown `kid` refetches the issuer's keys at most this often, so random kids cannot make the
    # plane hammer the issuer; keys older than the cache age are refetched on next use.
    oidc_jwks_min_refresh_seconds: float = Field(default=60, ge=0)
    oidc_jwks_cache_seconds: float = Field(default=3600, gt=0)
    oidc_http_timeout_seconds: float = Field(default=5, gt=0, le=60)

    hf_endpoint: str = "https://huggingface.co"
    # Name of an env var, or `file:<path>`, holding the Hugging Face token. Never the token itself.
    hf_token_ref: str | None = None

    # Review of drafts (ArtifactWorkflow).
    review_deadline_seconds: int = Field(default=7 * 24 * 3600, ge=60)
    review_four_eyes: bool = True
    review_signal_decisions: bool = Field(default=True, description="accept approve/reject signals")
    # Reference (env var name or file:<path>) to a webhook URL that receives review reminders.
    review_webhook_ref: str | None = None

    # Rollouts.
    vllm_runtime_image: str = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0"
    deploy_namespace: str = "default"
    # Name of the Kubernetes Secret (in each cluster) holding the Hugging Face token: a reference.
    hf_token_secret: str | None = "hf-token"
    ready_deadline_seconds: float | None = Field(default=None, description="override the size-scaled deadline")
    rollout_poll_seconds: float = 2.0
    # A worker pod that finds no node this long gives its cluster up (its replicas are placed elsewhere).
    unschedulable_grace_seconds: float = Field(default=120, ge=0)
    # A serving workload keeps watching its clusters (wingsmith/domain/reconcile.py): a look at each DGD's
    # status this often, a probe of its frontend this often, and a cluster that stays unready or
    # unreachable this long has its replicas placed elsewhere.
    watch_status_seconds: float = Field(default=10, gt=0)
    watch_probe_seconds: float = Field(default=30, gt=0)
    # A look answers on news; with none, after this long (its workflow hears from every cluster at least
    # this often).
    watch_report_seconds: float = Field(default=300, gt=0)
    drift_grace_seconds: float = Field(default=120, ge=0)
    # A workload's autoscaler (docs/autoscaling.md) decides this often, and waits this long for an approval.
    autoscaler_period_seconds: float = Field(default=30, gt=0, le=3600)
    autoscaler_approval_seconds: float = Field(default=3600, gt=0, le=7 * 86_400)
    watch_looks_per_run: int = Field(default=360, ge=1,
                                     description="answered looks before the workflow continues as new")

    # The gateway that gives endpoints one model name: the embedded router ("local") or Envoy AI Gateway.
    gateway: str = Field(default="local", pattern="^(local|envoy)$")
    gateway_port: int = 8080
    # Unset: http://127.0.0.1:<gateway_port>, so moving the port moves the URL everywhere.
    gateway_url: str = ""
    # Reference (env var name or file:<path>) to the local gateway's admin token.
    gateway_admin_token_ref: str | None = None
    # Every gateway replica pulls the published route table (WINGSMITH_GATEWAY_ROUTES_SOURCE): a push
    # to gateway_url that fails once the table is published is then only logged, not retried.
    gateway_routes_pulled: bool = False
    gateway_kubeconfig: str | None = Field(default=None, description="envoy: the gateway cluster's kubeconfig by "
                                           "reference (file:, env: or secret:, as a member cluster's)")
    gateway_context: str | None = None
    gateway_namespace: str = "default"
    gateway_name: str = "wingsmith"
    drain_grace_seconds: int = 30
    # The console's traffic charts (wingsmith/adapters/gateway/traffic_sampler.py): one API replica reads each
    # gateway's counters this often (0: never) and keeps this long of them. Unset URLs: gateway_url when
    # the gateway is local. Several replicas behind one Service would mix their counters, so either list
    # every replica's own URL, or name URLs whose host is resolved each period to every address (a
    # headless Service's name) and read each address as its own gateway (`traffic_gateway_dns`).
    traffic_sample_seconds: float = Field(default=10, ge=0)
    traffic_keep_seconds: float = Field(default=3900, ge=60)
    traffic_gateway_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    traffic_gateway_dns: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # The watch on upstream: how often each approved repository's branch is checked, and where a new
    # draft is announced (an env var *name* or `file:<path>` holding the webhook URL; never the URL).
    watch_interval_seconds: int = Field(default=24 * 3600, ge=60)
    watch_webhook_ref: str | None = None

    # Payload encryption (wingsmith/adapters/codec.py): a reference (env var name or file:<path>) to a 32-byte
    # AES-256 key as base64 or hex. Unset: payloads are stored as plain JSON.
    payload_key_ref: str | None = None
    # References to previous keys, comma-separated: they only decrypt, so a key can be rotated.
    payload_old_key_refs: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Kubeconfig users whose credentials run a program (exec plugins by command base name,
    # auth-providers by name) that the operator trusts; every other such user is refused.
    kubeconfig_exec_allow: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # The only directory kubeconfig files (file: references, and files a kubeconfig names) may be in.
    # Unset: $WINGSMITH_HOME/kubeconfigs.
    kubeconfig_dir: Path | None = None

    # Observability (docs/observability.md): the worker's one scrape port, and where the Temporal SDK's
    # own Prometheus endpoint binds on loopback (0: any free port) for the worker to pass it through.
    worker_metrics_port: int = Field(default=9464, ge=0, le=65535)
    worker_metrics_host: str = "127.0.0.1"
    worker_sdk_metrics_port: int = Field(default=0, ge=0, le=65535)
    # The API's /metrics has no token, like every Prometheus exporter; false turns it off.
    api_metrics: bool = True
    # The largest request body the API reads (wingsmith/adapters/body_limit.py): checked before auth, so an anonymous
    # caller cannot make it hold more. The API's own bodies are small; larger ones get 413.
    max_request_bytes: int = Field(default=1024 * 1024, ge=4096)
    # Planning by load (wingsmith/adapters/traffic_plans.py): traffic plans (a workload's `target`) one team may have
    # in flight at once; past it the API answers 429 with Retry-After. The perf worker runs one search at a
    # time, so another team's plan waits behind at most this many of each team's.
    traffic_plans_per_team: int = Field(default=2, ge=1, le=64)

    # Worker Versioning (worker/versioning.py): the Worker Deployment a worker belongs to and its build id
    # (the image tag). Unset: the worker runs unversioned. The names are the Temporal Worker Controller's.
    worker_deployment: str | None = Field(
        default=None, pattern=r"^[^.]+$",
        validation_alias=AliasChoices("TEMPORAL_DEPLOYMENT_NAME", "WINGSMITH_WORKER_DEPLOYMENT"))
    worker_build_id: str | None = Field(
        default=None, max_length=255,
        validation_alias=AliasChoices("TEMPORAL_WORKER_BUILD_ID", "WINGSMITH_WORKER_BUILD_ID"))

    log_level: str = "INFO"
    log_format: str = Field(default="auto", description="json, console, or auto (console on a TTY)")

    @field_validator("payload_old_key_refs", "kubeconfig_exec_allow", "expected_clusters", "expected_task_queues",
                     "oidc_algorithms", "traffic_gateway_urls", "traffic_gateway_dns", mode="before")
    @classmethod
    def _comma_separated(cls, value):
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("traffic_gateway_dns")
    @classmethod
    def _resolvable(cls, value: list[str]) -> list[str]:
        for url in value:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"WINGSMITH_TRAFFIC_GATEWAY_DNS: {url!r} is not an http(s) URL with a host name "
                                 "to resolve (for example http://wingsmith-gateway-replicas:8080)")
        return value

    @model_validator(mode="after")
    def _versioned_as_a_whole(self) -> Settings:
        if bool(self.worker_deployment) != bool(self.worker_build_id):
            raise ValueError("TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID go together: set both "
                             "(a versioned worker) or neither")
        return self

    @model_validator(mode="after")
    def _urls_follow_ports(self) -> Settings:
        derived = {"temporal_ui_url": f"http://localhost:{self.temporal_ui_port}",
                   "gateway_url": f"http://127.0.0.1:{self.gateway_port}"}
        for name, default in derived.items():
            if not getattr(self, name):
                setattr(self, name, default)
                self.__pydantic_fields_set__.discard(name)  # derived, not set: the CLI may prefer plane.json
        if "gateway_url" in self.model_fields_set:
            self.gateway_url = self.gateway_url.rstrip("/")
        return self

    @property
    def traffic_gateways(self) -> list[str]:
        """The gateways whose counters the plane samples at fixed URLs (Envoy AI Gateway exports others: none
        by default, and none beside names resolved to every replica)."""
        if self.traffic_gateway_urls or self.traffic_gateway_dns:
            return self.traffic_gateway_urls
        return [self.gateway_url] if self.gateway == "local" else []

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def kubeconfig_directory(self) -> Path:
        return (self.kubeconfig_dir or self.home_dir / "kubeconfigs").expanduser().resolve()

    @property
    def catalogs_dir(self) -> Path:
        """Stored recipe catalog versions (refreshes, local edits) and which one is in force."""
        return self.home_dir / "catalogs"

    @property
    def tokens_file(self) -> Path:
        return self.home_dir / "tokens.json"

    @property
    def plane_file(self) -> Path:
        """Where `wingsmith up` records the addresses of the plane it runs (read by every CLI command)."""
        return self.home_dir / "plane.json"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()

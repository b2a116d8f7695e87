"""The FastAPI application: REST under /v1, OpenAPI at /docs.

Route modules live in `api/routes/`; each exposes `router` and is included here by name, so the
list below is the map of the API.
"""

from __future__ import annotations

import asyncio
import importlib
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI
from temporalio.client import Client

from api.auth import TokenTable
from api.errors import install_error_handlers, request_too_large
from api.metrics import RequestMetrics
from api.metrics import router as metrics_router
from api.security_headers import SecurityHeaders
from wingsmith.adapters.body_limit import BodyLimit
from wingsmith.adapters.logs import configure_logging, get_logger
from wingsmith.adapters.oidc import OidcVerifier
from wingsmith.adapters.token_file import local_admin_tokens
from wingsmith.adapters.tracing import configure_tracing, instrument_fastapi
from wingsmith.adapters.version import release
from wingsmith.domain.config import Settings, get_settings

ROUTE_MODULES = ["health", "recipes", "resolve", "artifacts", "clusters", "workloads", "follow", "endpoints",
                 "watches", "teams", "console", "codec", "gateway_routes"]

# The Temporal UI's codec calls carry whole payloads (up to Temporal's 4 MB message, base64-encoded);
# their handler reads the body only after checking the caller's token.
CODEC_MAX_REQUEST_BYTES = 8 * 1024 * 1024

log = get_logger("wingsmith.api")


def _token_table(settings: Settings) -> TokenTable:
    raw = settings.auth_tokens or local_admin_tokens(settings.tokens_file)
    return TokenTable.from_json(raw)


@asynccontextmanager
async def _lifespan(app: FastAPI):
    settings: Settings = app.state.settings
    owned_pool = None
    if app.state.db is None and settings.database_url:
        from wingsmith.adapters.store.db import open_pool
        try:
            owned_pool = app.state.db = await open_pool(settings.database_url, wait_seconds=20)
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("database not reachable at start; /readyz will say so", error=str(exc))
    if app.state.temporal is None:
        from wingsmith.adapters.temporal import configured_address, connect
        try:
            if configured_address(settings):  # TEMPORAL_ADDRESS or a temporal.toml profile's
                app.state.temporal = await asyncio.wait_for(connect(settings), timeout=10)
        except Exception as exc:  # noqa: BLE001 - any connect failure only degrades /readyz
            log.warning("temporal not reachable at start; /readyz will say so", error=str(exc))
    from wingsmith.adapters.gateway.traffic_sampler import sampler_for
    sampler = sampler_for(app.state.db, settings)  # one API replica samples: it holds the lock (docs/console.md)
    if sampler is not None:
        sampler.start()
    app.state.traffic_sampler = sampler
    try:
        yield
    finally:
        if sampler is not None:
            await sampler.stop()
        if owned_pool is not None:
            await owned_pool.close()


def create_app(settings: Settings | None = None, *, tokens: TokenTable | None = None,
               db: asyncpg.Pool | None = None, temporal: Client | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_format)
    configure_tracing("wingsmith-api")
    app = FastAPI(title="Wingsmith", version=release(), lifespan=_lifespan,
                  description="Hugging Face model → multi-cluster NVIDIA Dynamo endpoint, "
                              "driven by Temporal, with a person in the loop.")
    app.state.settings = settings
    app.state.tokens = tokens or _token_table(settings)
    app.state.oidc = OidcVerifier.from_settings(settings)  # None: single sign-on off
    app.state.db = db
    app.state.temporal = temporal
    install_error_handlers(app)
    for name in ROUTE_MODULES:
        app.include_router(importlib.import_module(f"api.routes.{name}").router)
    if settings.api_metrics:
        app.include_router(metrics_router)
    # Added first, so it runs inside the metrics (its 413s are counted) and before routing and auth.
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes, refuse=request_too_large,
                       larger={"/codec/": CODEC_MAX_REQUEST_BYTES})
    app.add_middleware(RequestMetrics)
    app.add_middleware(SecurityHeaders)  # the outermost of ours: every answer of the app carries them, 413s too
    instrument_fastapi(app)
    return app

"""The upgrade test bed: the endpoint bed (Postgres, Temporal dev server, offline Hub, simulated
clusters, the local gateway)."""

from tests.endpoints.conftest import (  # noqa: F401 - pytest fixtures
    HF_TOKEN,
    HF_TOKEN_ENV,
    TOKENS,
    api,
    clusters,
    deps,
    gateway,
    hub,
    settings,
    sims,
)

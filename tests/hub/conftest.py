"""The offline Hub for the whole module run, with faults cleared after every test, and resolvers
that talk to it through the real `huggingface_hub` client."""

from __future__ import annotations

import json

import pytest

from sim.hub import start_hub_server
from tests.upstream import require_upstream, snapshot_config, snapshot_meta, snapshot_repos
from wingsmith.adapters.hub.resolver import Resolver, RetryPolicy

TOKEN = "hf_TestTokenThatMustNeverLeak0123456789"
TOKEN_ENV = "WINGSMITH_TEST_HF_TOKEN"
# Short waits so retries stay fast; the rate-limit wait is whatever the server advertises.
FAST_RETRY = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.05, rate_limit_retries=3, max_rate_limit_wait=5)


def upstream_models() -> dict[str, dict]:
    """repo_id → {"config": ..., "meta": ...} for every published config in the upstream tier's
    hf-configs; a module calling this at import is skipped when the data is absent (tests/upstream.py)."""
    out = {}
    for cfg in sorted(require_upstream("hf-configs").glob("*/*/config.json")):
        meta = cfg.with_name("meta.json")
        out[f"{cfg.parent.parent.name}/{cfg.parent.name}"] = {
            "config": json.loads(cfg.read_text()), "meta": json.loads(meta.read_text()) if meta.exists() else {}}
    return out


def shipped_models() -> dict[str, dict]:
    """The same shape as `upstream_models()`, from the Hub snapshot the repository ships: the published
    configs and meta.json figures, on a bare clone (test_snapshot.py checks them against upstream)."""
    return {repo_id: {"config": snapshot_config(repo_id), "meta": snapshot_meta(repo_id)}
            for repo_id in snapshot_repos()}


@pytest.fixture(scope="session")
def hub_server():
    handle = start_hub_server(grants={"*": {TOKEN}})
    yield handle
    handle.stop()


@pytest.fixture
def hub(hub_server):
    hub_server.faults.clear()
    yield hub_server
    hub_server.faults.clear()


@pytest.fixture
def token_env(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    return TOKEN_ENV


@pytest.fixture
def make_resolver(hub, tmp_path):
    def make(token_ref: str | None = None, **kw) -> Resolver:
        kw.setdefault("retry", FAST_RETRY)
        kw.setdefault("timeout", 5.0)
        return Resolver(hub.url, token_ref, tmp_path / "hf-cache", **kw)
    return make

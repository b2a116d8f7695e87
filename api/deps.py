"""What route handlers and console pages need from the running app, as FastAPI dependencies (`async def`:
they do no I/O, and FastAPI would run a plain `def` in its thread pool, a thread hop per request).

This is the one place that reads the app's state: the registry pool, the Temporal client (absent while
Temporal is unreachable: `TemporalDep` then answers 503 `temporal_unavailable`, `MaybeTemporalDep` gives
None to reads that only add the workflow's live view), and the per-process objects the services share
(the resolver's cache, the live inventory reads, the cluster checks' bounds)."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import asyncpg
from fastapi import Depends, Request
from temporalio.client import Client

from api.auth import TokenTable
from api.errors import ApiError, temporal_unavailable
from api.services.cluster_checks import ClusterChecks
from api.services.inventories import LiveReads
from api.services.proposals import Answers, Proposals
from wingsmith.adapters.hub.resolver import Resolver
from wingsmith.domain.config import Settings

_resolver_lock = threading.Lock()


def temporal_or_none(state: Any) -> Client | None:
    """The app's Temporal client; None while Temporal has not been reached (api/app.py, /readyz)."""
    return getattr(state, "temporal", None)


def proposals_of(state: Any) -> Proposals:
    """One resolver per app, so its proposal cache is shared by every request."""
    resolver = getattr(state, "resolver", None)
    if resolver is None:  # set once and never replaced: no lock needed to read it
        with _resolver_lock:
            if getattr(state, "resolver", None) is None:
                settings = state.settings
                state.resolver = Resolver(settings.hf_endpoint, settings.hf_token_ref,
                                          settings.home_dir / "hf-cache")
            resolver = state.resolver
    answers = getattr(state, "resolve_answers", None)
    if answers is None:  # only the event loop's thread gets here: no lock needed
        answers = state.resolve_answers = Answers()
    return Proposals(resolver, answers)


def live_reads_of(state: Any) -> LiveReads:
    if getattr(state, "live_reads", None) is None:
        state.live_reads = LiveReads()
    reads: LiveReads = state.live_reads
    return reads


def cluster_checks_of(state: Any) -> ClusterChecks:
    if getattr(state, "cluster_checks", None) is None:
        state.cluster_checks = ClusterChecks()
    checks: ClusterChecks = state.cluster_checks
    return checks


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _db(request: Request) -> asyncpg.Pool:
    pool = getattr(request.app.state, "db", None)
    if pool is None:
        raise ApiError(503, "the registry database is not reachable")
    return pool


async def _temporal(request: Request) -> Client:
    client = temporal_or_none(request.app.state)
    if client is None:
        raise temporal_unavailable()
    return client


async def _maybe_temporal(request: Request) -> Client | None:
    return temporal_or_none(request.app.state)


async def _tokens(request: Request) -> TokenTable:
    return request.app.state.tokens


async def _proposals(request: Request) -> Proposals:
    return proposals_of(request.app.state)


async def _live_reads(request: Request) -> LiveReads:
    return live_reads_of(request.app.state)


async def _cluster_checks(request: Request) -> ClusterChecks:
    return cluster_checks_of(request.app.state)


SettingsDep = Annotated[Settings, Depends(_settings)]
DbDep = Annotated[asyncpg.Pool, Depends(_db)]
TemporalDep = Annotated[Client, Depends(_temporal)]
MaybeTemporalDep = Annotated[Client | None, Depends(_maybe_temporal)]
TokensDep = Annotated[TokenTable, Depends(_tokens)]
ProposalsDep = Annotated[Proposals, Depends(_proposals)]
LiveReadsDep = Annotated[LiveReads, Depends(_live_reads)]
ClusterChecksDep = Annotated[ClusterChecks, Depends(_cluster_checks)]

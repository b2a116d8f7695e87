"""Which workload a model page suggests: one the registered clusters can place now, not merely the
recipe's default card. Candidates are the layouts and NVIDIA cards the recipe allows whose GPUs hold the
published floor; each is put through the same dry-run placement as `POST /v1/placements/dry-run`, with
the clusters' inventories read once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import asyncpg
from fastapi import Request
from pydantic import BaseModel

from api.deps import live_reads_of, temporal_or_none
from api.errors import ApiError
from api.responses import DryRunResponse
from api.services.planning import DryRunRequest, dry_run
from wingsmith.domain.config import Settings
from wingsmith.domain.placement import ClusterInventory, PlacementPlan
from wingsmith.domain.recipes import Catalog, InvalidChoice, Recipe, serve_command
from wingsmith.domain.recipes.evidence import Evidence

# A page view must not hold a reader long: this many candidates at most go through the dry run.
MAX_CANDIDATES = 24
# Model pages are public, and a live read starts a workflow on the worker: every page view shares one
# read of the clusters per this many seconds, so viewers cannot make the plane start workflows at will.
LIVE_READ_TTL_SECONDS = 10.0


class SharedInventories:
    """The clusters' live inventories as last read for a suggestion, shared by every page view of one app."""

    def __init__(self) -> None:
        self.read_at = float("-inf")
        self.inventories: list[ClusterInventory] = []
        self.lock = asyncio.Lock()  # concurrent views wait for the one read instead of starting their own

    def fresh(self) -> list[ClusterInventory] | None:
        return list(self.inventories) if time.monotonic() - self.read_at < LIVE_READ_TTL_SECONDS else None

    def keep(self, inventories: list[ClusterInventory]) -> None:
        self.inventories, self.read_at = list(inventories), time.monotonic()


def shared_inventories(request: Request) -> SharedInventories:
    state = request.app.state
    if getattr(state, "suggest_inventories", None) is None:
        state.suggest_inventories = SharedInventories()
    shared: SharedInventories = state.suggest_inventories
    return shared


class Suggestion(BaseModel):
    hardware: str
    layout: str
    gpus: int
    nodes: int
    checked: bool  # False: no clusters to check against, the recipe's default is shown
    note: str


class Candidate(BaseModel):
    hardware: str
    layout: str
    gpus: int
    nodes: int


def candidates(recipe: Recipe, evidence: Evidence, catalog: Catalog) -> list[Candidate]:
    """Layout × card pairs the recipe allows and the plane can place, whose GPUs hold the default
    variant's published floor (a floor is for the whole replica), fewest GPUs first, the default first."""
    floor = next((v.vram_minimum_gb for v in evidence.variants if v.name == evidence.default_variant), 0.0)
    memory = {h.id: h.memory_gb_per_gpu for h in evidence.hardware if h.placeable and h.status != "unsupported"}
    found = []
    for layout in evidence.layouts:
        for hw in layout.allowed:
            if hw not in memory:
                continue
            try:
                command = serve_command(recipe, evidence.default_variant, hw, layout.name, [], catalog=catalog)
            except (InvalidChoice, LookupError):
                continue
            per_gpu = memory[hw]
            if per_gpu is not None and command.gpus * per_gpu < floor:
                continue
            found.append(Candidate(hardware=hw, layout=layout.name, gpus=command.gpus, nodes=command.nodes))
    # Disaggregation is a tuning choice, never the first thing to suggest; then the fewest GPUs.
    return sorted(found, key=lambda c: (c.layout == "pd_cluster", c.gpus, c.layout != evidence.default_layout,
                                        c.hardware != evidence.default_hardware))


# Tries one candidate: the placement summary when it would be placed whole, else None.
Trial = Callable[[Candidate], Awaitable[str | None]]


def placement_trial(db: asyncpg.Pool, request: Request, settings: Settings) -> Trial:
    """Placement alone, through the same dry run as `POST /v1/placements/dry-run`; the clusters'
    inventories are read live once (by the worker) and reused for the other candidates."""
    inventories: list[ClusterInventory] = []

    shared = shared_inventories(request)

    async def attempt(plan: PlacementPlan) -> DryRunResponse | None:
        try:
            return await dry_run(DryRunRequest(plan=plan, inventories=inventories, live=not inventories), db=db,
                                 temporal=temporal_or_none(request.app.state), settings=settings,
                                 live_reads=live_reads_of(request.app.state))
        except ApiError:
            return None

    async def trial(option: Candidate) -> str | None:
        plan = PlacementPlan(hardware=option.hardware, gpus_per_node=max(1, option.gpus // max(1, option.nodes)),
                             nodes_per_replica=option.nodes, replicas=1)
        if not inventories:
            async with shared.lock:
                cached = shared.fresh()
                if cached is not None:
                    inventories.extend(cached)
                else:
                    answer = await attempt(plan)
                    if answer is not None:
                        inventories.extend(answer.inventories)
                        shared.keep(answer.inventories)
        answer = await attempt(plan)
        if answer is None:
            return None
        return answer.decision.summary if answer.decision.clusters and answer.decision.unplaced == 0 else None

    return trial


async def suggest(recipe: Recipe, evidence: Evidence, catalog: Catalog, trial: Trial | None,
                  fallback: Candidate) -> Suggestion:
    """The first candidate `trial` accepts; without a trial (no registry), the recipe's default."""
    options = candidates(recipe, evidence, catalog)[:MAX_CANDIDATES]
    if trial is None:
        return Suggestion(**fallback.model_dump(), checked=False,
                          note="The plane has no registered clusters to check against here, so this is the "
                               "recipe's default.")
    for option in options:
        summary = await trial(option)
        if summary is not None:
            return Suggestion(**option.model_dump(), checked=True,
                              note=f"The registered clusters can place this now: {summary.rstrip('.')}.")
    return Suggestion(**fallback.model_dump(), checked=True,
                      note="None of the registered clusters can place one replica of this model on any layout and "
                           "card the recipe allows (whose GPUs hold its floor); this is the recipe's default.")

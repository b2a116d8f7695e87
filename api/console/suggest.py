"""Which workload a model page suggests: one the registered clusters can place now, not merely the
recipe's default card. Candidates are the layouts and NVIDIA cards the recipe allows whose GPUs hold the
published floor; each is put through the same dry-run placement as `POST /v1/placements/dry-run`, with
the clusters' inventories read once."""

from __future__ import annotations

import asyncpg
from pydantic import BaseModel

from api.auth import Principal
from api.errors import ApiError
from api.routes.clusters import DryRunRequest, dry_run
from wingsmith.placement import ClusterInventory, PlacementPlan
from wingsmith.recipes import Catalog, InvalidChoice, Recipe, serve_command
from wingsmith.recipes.evidence import Evidence

# A page view must not hold a reader long: this many candidates at most go through the dry run.
MAX_CANDIDATES = 24


class Suggestion(BaseModel):
    hardware: str
    layout: str
    gpus: int
    nodes: int
    placed_on: list[str]  # clusters that would take the replica ([] when none were checked)
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
            if memory[hw] is not None and command.gpus * memory[hw] < floor:
                continue
            found.append(Candidate(hardware=hw, layout=layout.name, gpus=command.gpus, nodes=command.nodes))
    return sorted(found, key=lambda c: (c.gpus, c.layout != evidence.default_layout,
                                        c.hardware != evidence.default_hardware))


async def suggest(recipe: Recipe, evidence: Evidence, catalog: Catalog, db: asyncpg.Pool | None,
                  principal: Principal | None, fallback: Candidate) -> Suggestion:
    options = candidates(recipe, evidence, catalog)[:MAX_CANDIDATES]
    if db is None or not options:
        return Suggestion(**fallback.model_dump(), placed_on=[], checked=False,
                          note="The plane has no registered clusters to check against here, so this is the "
                               "recipe's default.")
    inventories: list[ClusterInventory] | None = None
    for option in options:
        plan = PlacementPlan(hardware=option.hardware, gpus_per_node=max(1, option.gpus // max(1, option.nodes)),
                             nodes_per_replica=option.nodes, replicas=1)
        try:
            # Live inventories on the first call only; the later ones reuse them as what-if inventories.
            request = DryRunRequest(plan=plan, inventories=inventories or [], live=inventories is None)
            answer = await dry_run(request, db, principal)
        except ApiError:
            continue
        if not answer.decision.clusters:
            break  # no clusters registered: nothing can be checked
        inventories = answer.inventories
        if answer.decision.unplaced == 0:
            return Suggestion(**option.model_dump(), placed_on=sorted(answer.decision.replicas), checked=True,
                              note=f"The registered clusters can place this now: {answer.decision.summary}")
    if inventories is None:
        return Suggestion(**fallback.model_dump(), placed_on=[], checked=False,
                          note="No clusters are registered yet, so this is the recipe's default.")
    return Suggestion(**fallback.model_dump(), placed_on=[], checked=True,
                      note="None of the registered clusters can place one replica of this model on any layout and "
                           "card the recipe allows (whose GPUs hold its floor); the steps show the recipe's default.")

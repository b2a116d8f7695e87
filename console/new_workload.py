"""Create a workload from the console. The form's fields are named like `POST /v1/workloads`'s JSON;
while it is filled in, the page shows the fit check and a dry-run placement (which clusters would take
the replicas, and why the others would not), refreshed by a small GET fragment or, without scripts, by
the form's own "Check" button. Both the check and the create go through the API's own handler, so
the console refuses what the API refuses, in the same words.

A workload may be sized by traffic instead of replicas (`sizing=target` and the `target.*` fields). Planning
it asks AIConfigurator, a search of minutes when not cached yet, so the check refreshed on every change
only validates those fields; the whole page (the "Check again" button, which needs no script) plans the
target and shows every candidate card's plan. A plan not there within a few seconds (a cold search) is shown
as it progresses (the card being planned), and the page checks again by itself until it is there (issue 52);
a create whose plan is not there yet lands on that page, and creating again then gets the plan at once."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import asyncpg
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ValidationError

from api.auth import Principal
from api.deps import DbDep, SettingsDep, live_reads_of, temporal_or_none
from api.errors import ApiError
from api.responses import Created, DryRun, Planning
from api.services import workloads as workloads_service
from console.forms import blank_to_none, refusal_words
from console.rendering import ConsoleRoute, read_form, redirect, render
from console.session import ConsoleOperator, check_csrf
from console.suggest import Candidate, placement_trial, suggest
from console.views import default_choice
from console.words import layout_name
from console.workloads import workload_path
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.adapters.store import artifacts as artifact_store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.domain.config import Settings
from wingsmith.domain.placement import PlacementDecision
from wingsmith.domain.placement.left_out import LeftOut, left_out
from wingsmith.domain.quotas import Verdict
from wingsmith.domain.recipes.evidence import Evidence
from wingsmith.domain.target_plan import TargetChoice
from wingsmith.domain.workloads import WorkloadPlan, WorkloadRequest

router = APIRouter(route_class=ConsoleRoute)

# The traffic target's fields: the form's name (the API's JSON path) → the form model's attribute.
TARGET_FIELDS = {"target.requests_per_second": "target_rps", "target.isl": "target_isl", "target.osl": "target_osl",
                 "target.ttft_ms": "target_ttft_ms", "target.tpot_ms": "target_tpot_ms"}
TEXT_FIELDS = ("artifact_id", "name", "hardware", "layout", "variant", "sizing", "replicas", "served_model_name",
               *TARGET_FIELDS)
SIZINGS = ("replicas", "target")
# How often a page whose plan is on its way asks again (the API's status URL asks for 2 s; a page costs more).
PLANNING_REFRESH_SECONDS = 3


class WorkloadForm(BaseModel):
    """The form as typed: text, so a refused value is shown back exactly."""
    artifact_id: str = ""
    name: str = ""
    hardware: str = ""
    layout: str = ""
    variant: str = ""
    sizing: str = "replicas"  # or "target": size it by traffic
    replicas: str = "1"
    target_rps: str = ""
    target_isl: str = ""
    target_osl: str = ""
    target_ttft_ms: str = ""
    target_tpot_ms: str = ""
    served_model_name: str = ""
    features: list[str] = []

    @classmethod
    def read(cls, values: dict[str, list[str]]) -> WorkloadForm:
        given = {TARGET_FIELDS.get(k, k): values[k][0] for k in TEXT_FIELDS if values.get(k)}
        if given.get("sizing") not in SIZINGS:
            given.pop("sizing", None)
        return cls(**given, features=[f for f in values.get("features", []) if f])

    def query(self) -> list[tuple[str, str]]:
        """The fields as the form sends them (its "Check again" GET)."""
        attrs = {attr: name for name, attr in TARGET_FIELDS.items()}
        fields = [(attrs.get(k, k), v) for k, v in self.model_dump(exclude={"features"}).items() if v]
        return fields + [("features", f) for f in self.features]

    @property
    def by_target(self) -> bool:
        return self.sizing == "target"

    def request(self) -> WorkloadRequest:
        """The API's request body for these fields; blank optional fields are left out, as in JSON."""
        body: dict[str, Any] = {"artifact_id": self.artifact_id.strip(), "hardware": self.hardware.strip(),
                                "features": self.features}
        if self.by_target:
            body["target"] = {name.removeprefix("target."): value for name, attr in TARGET_FIELDS.items()
                              if (value := blank_to_none(getattr(self, attr))) is not None}
        else:
            body["replicas"] = self.replicas.strip() or "1"
        for key in ("name", "layout", "variant", "served_model_name"):
            if (value := blank_to_none(getattr(self, key))) is not None:
                body[key] = value
        return WorkloadRequest.model_validate(body)


class Choices(BaseModel):
    """What the selected artifact's draft allows, for the selects and checkboxes."""
    artifacts: list[tuple[str, str]]  # (id, label)
    hardware: list[tuple[str, str]]
    layouts: list[tuple[str, str]]
    variants: list[tuple[str, str]]
    features: list[tuple[str, str]]  # opt-in features (the rest are on by default)


class Check(BaseModel):
    """The fit check and dry-run placement for the form as it stands, or the API's refusal. Sized by
    traffic: also every candidate card's plan, or, from the check refreshed while typing, only that the
    target is well formed and waits to be planned."""
    refusal: str | None = None
    plan: WorkloadPlan | None = None
    placement: PlacementDecision | None = None
    left_out: LeftOut | None = None  # a large fleet's clusters without a verdict of their own, bounded
    target_plan: TargetChoice | None = None
    unplanned_target: bool = False
    planning: Planning | None = None  # sized by traffic: the plan on its way
    quota: Verdict | None = None  # whether creating it fits the team's quota


async def _approved(db: asyncpg.Pool) -> list[dict[str, Any]]:
    """Approved artifacts a workload may run: a superseded one is refused by the API, so not offered."""
    return [a for a in await artifact_store.list_artifacts(db, state="approved", limit=500) if not a["superseded_by"]]


async def _evidence(db: asyncpg.Pool, artifact_id: str) -> Evidence | None:
    row = await workload_store.approved_artifact(db, artifact_id) if artifact_id else None
    return Evidence.model_validate(row["evidence"]) if row is not None and row["evidence"] else None


async def _choices(db: asyncpg.Pool, evidence: Evidence | None) -> Choices:
    artifacts = [(a["id"], f"{a['repo_id']} @{a['sha'][:12]}") for a in await _approved(db)]
    if evidence is None:
        return Choices(artifacts=artifacts, hardware=[], layouts=[], variants=[], features=[])
    return Choices(
        artifacts=artifacts,
        hardware=[(h.id, h.display_name) for h in evidence.hardware if h.placeable and h.status != "unsupported"],
        layouts=[(lay.name, layout_name(lay.name)) for lay in evidence.layouts],
        variants=[(v.name, f"{v.name} ({v.precision})") for v in evidence.variants],
        features=[(f.name, f.name) for f in evidence.features if f.default == "opt_in"])


async def _with_defaults(form: WorkloadForm, evidence: Evidence | None, request: Request, principal: Principal,
                         db: asyncpg.Pool, settings: Settings) -> WorkloadForm:
    """Blank selects start at a card and layout the registered clusters can place (the model page's
    suggestion), else at the recipe's default choice."""
    if evidence is None:
        return form
    base = default_choice(evidence)
    hardware, layout = base.hardware, base.layout
    catalog = load_catalog()
    recipe = catalog.recipes.get(evidence.recipe)
    if recipe is not None and not (form.hardware and form.layout):
        placed = placement_trial(db, request, settings)

        async def trial(option: Candidate) -> str | None:
            # Placement first (the clusters' inventories read once), then the whole check the API makes
            # (draft, sizing, placement) for a candidate that places.
            if await placed(option) is None:
                return None
            tried = form.model_copy(update={"hardware": option.hardware, "layout": option.layout,
                                            "variant": form.variant or base.variant, "sizing": "replicas",
                                            "replicas": "1"})
            check = await check_workload(tried, request, principal, db, settings)
            return check.placement.summary if check.placement and not check.placement.unplaced else None
        fallback = Candidate(hardware=base.hardware, layout=base.layout, gpus=1, nodes=1)
        picked = await suggest(recipe, evidence, catalog, trial, fallback)
        hardware, layout = picked.hardware, picked.layout
    return form.model_copy(update={"hardware": form.hardware or hardware, "layout": form.layout or layout,
                                   "variant": form.variant or base.variant})


async def check_workload(form: WorkloadForm, request: Request, principal: Principal, db: asyncpg.Pool,
                         settings: Settings, *, plan_target: bool = True) -> Check:
    """The API's dry run for the form. `plan_target=False`: a form sized by traffic is only validated
    (planning it may start a search of minutes)."""
    if not form.artifact_id:
        return Check(refusal="Choose an approved artifact first.")
    try:
        body = form.request().model_copy(update={"dry_run": True})
    except ValidationError as exc:
        return Check(refusal=refusal_words(exc))
    if body.target is not None and not plan_target:
        return Check(unplanned_target=True)
    try:
        # The API's create handler with dry_run: the same validation, fit check and placement dry run.
        result = await workloads_service.create(body, principal=principal, db=db, settings=settings,
                                                temporal=temporal_or_none(request.app.state),
                                                live_reads=live_reads_of(request.app.state))
    except ApiError as err:
        return Check(refusal=err.message, target_plan=unreachable(err))
    if isinstance(result, Planning):
        return Check(planning=result)
    if not isinstance(result, DryRun):  # the body asked for a dry run
        raise TypeError(f"a dry-run create answered {type(result).__name__}")
    placement = PlacementDecision.model_validate(result.placement)
    return Check(plan=result.plan, placement=placement,
                 left_out=left_out(placement.ruled_out, placement.passed_over), target_plan=result.target_plan,
                 quota=result.quota)


def unreachable(err: ApiError) -> TargetChoice | None:
    """A target no card meets: what each card reaches, from the refusal's details, for the same table."""
    if err.code != "target_unreachable" or not isinstance(err.details, dict):
        return None
    return TargetChoice.model_validate({"chosen": None, "candidates": err.details.get("candidates") or [],
                                        "refusal": err.message})


async def _page(request: Request, principal: Principal, db: asyncpg.Pool, settings: Settings, form: WorkloadForm, *,
                status_code: int = 200, error: str | None = None) -> Response:
    approved = await _approved(db)
    if not form.artifact_id and approved:
        form = form.model_copy(update={"artifact_id": approved[0]["id"]})
    evidence = await _evidence(db, form.artifact_id)
    form = await _with_defaults(form, evidence, request, principal, db, settings)
    check = await check_workload(form, request, principal, db, settings) if evidence is not None else None
    page = render(request, "workload_new.html", status_code=status_code, principal=principal, form=form,
                  choices=await _choices(db, evidence), check=check, error=error, evidence=evidence,
                  refresh_seconds=PLANNING_REFRESH_SECONDS)
    if check is not None and check.planning is not None:
        # No script needed: the browser asks for the same page again, which shows the plan once it is there.
        page.headers["Refresh"] = str(PLANNING_REFRESH_SECONDS)
    return page


@router.get("/workloads/new")
async def new_workload(request: Request, principal: ConsoleOperator, db: DbDep, settings: SettingsDep):
    if "csrf" in request.query_params:
        # The no-script "Check again" button sends the whole form by GET; keep its token out of the history.
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != "csrf"]
        return redirect(request.url.path + "?" + urlencode(kept))
    values = {k: request.query_params.getlist(k) for k in (*TEXT_FIELDS, "features")}
    if request.query_params.get("artifact") and not values["artifact_id"]:
        values["artifact_id"] = [request.query_params["artifact"]]
    return await _page(request, principal, db, settings, WorkloadForm.read(values))


@router.get("/workloads/new/check")
async def check_fragment(request: Request, principal: ConsoleOperator, db: DbDep, settings: SettingsDep):
    """The check alone, as an HTML fragment the form's script puts in place on every change."""
    values = {k: request.query_params.getlist(k) for k in (*TEXT_FIELDS, "features")}
    form = WorkloadForm.read(values)
    form = await _with_defaults(form, await _evidence(db, form.artifact_id), request, principal, db, settings)
    return render(request, "_workload_check.html", principal=principal,
                  check=await check_workload(form, request, principal, db, settings, plan_target=False))


@router.post("/workloads/new")
async def create_workload(request: Request, principal: ConsoleOperator, db: DbDep, settings: SettingsDep):
    values = await read_form(request)
    check_csrf(request, values)
    form = WorkloadForm.read(values)
    try:
        body = form.request()
    except ValidationError as exc:
        return await _page(request, principal, db, settings, form, status_code=422, error=refusal_words(exc))
    try:
        created = await workloads_service.create(body, principal=principal, db=db, settings=settings,
                                                 temporal=temporal_or_none(request.app.state),
                                                 live_reads=live_reads_of(request.app.state))
    except ApiError as err:
        return await _page(request, principal, db, settings, form, status_code=err.status, error=err.message)
    if isinstance(created, Planning):
        # The plan is on its way: its page follows it; creating again from there gets it at once.
        return redirect(request.url.path + "?" + urlencode(form.query()))
    if not isinstance(created, Created):  # the form never asks for a dry run
        raise TypeError(f"a create answered {type(created).__name__}")
    return redirect(workload_path(created.id) + "?" + urlencode({"created": 1}))

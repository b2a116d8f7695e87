"""Register a model from the console: the form takes `source`, shows the resolve proposal (commit,
weights, evidence, the plane's sizing) and, once confirmed, registers as `POST /v1/artifacts` does
(api/services/artifacts.py), which starts the artifact's workflow; the browser lands on the draft page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ValidationError

from api.deps import DbDep, ProposalsDep, SettingsDep, TemporalDep, TokensDep
from api.errors import ApiError
from api.services import artifacts as artifacts_service
from console.artifacts import draft_path
from console.forms import blank_to_none, refusal_words
from console.rendering import ConsoleRoute, first, read_form, redirect, render
from console.session import ConsoleOperator, check_csrf
from console.views import VariantRow, variant_rows
from wingsmith.domain.drafts import SizingTarget, VariantSizing
from wingsmith.domain.hub import ArtifactProposal
from wingsmith.domain.recipes.evidence import Evidence

router = APIRouter(route_class=ConsoleRoute)

WEIGHT_SOURCE_WORDS = {
    "safetensors_files": "the sizes of its safetensors files", "index_total_size": "its safetensors index",
    "parameter_counts": "the Hub's parameter counts", "config_estimate": "an estimate from config.json",
}


class ProposalView(BaseModel):
    """What a person checks before registering: the resolve answer, in the draft page's terms."""
    proposal: ArtifactProposal
    weight_gb: float | None
    weight_words: str
    evidence: Evidence | None
    target: SizingTarget | None
    variants: list[VariantRow]
    warnings: list[str]


def proposal_view(proposal: ArtifactProposal) -> ProposalView:
    sizing = proposal.sizing or {}
    target = sizing.get("target")
    return ProposalView(
        proposal=proposal,
        weight_gb=round(proposal.weight_bytes / 1e9, 1) if proposal.weight_bytes else None,
        weight_words=WEIGHT_SOURCE_WORDS.get(proposal.weight_bytes_source or "", "not known"),
        evidence=Evidence.model_validate(proposal.evidence) if proposal.evidence else None,
        target=SizingTarget.model_validate(target) if target else None,
        variants=variant_rows(Evidence.model_validate(proposal.evidence) if proposal.evidence else None,
                              [VariantSizing.model_validate(v) for v in sizing.get("sizing", [])]),
        warnings=list(sizing.get("warnings") or []))


@router.get("/artifacts/new")
async def register_form(request: Request, principal: ConsoleOperator, proposals: ProposalsDep,
                        source: str | None = None):
    proposal, error = None, None
    if source is not None and blank_to_none(source):
        try:
            # The same proposal `GET /v1/artifacts/resolve` answers.
            proposal = proposal_view(await proposals.propose(source.strip()))
        except ApiError as err:
            error = err.message
    return render(request, "artifact_new.html", status_code=200, principal=principal, source=source or "",
                  proposal=proposal, error=error)


@router.post("/artifacts/new")
async def register(request: Request, principal: ConsoleOperator, settings: SettingsDep, temporal: TemporalDep,
                   db: DbDep, proposals: ProposalsDep, tokens: TokensDep):
    form = await read_form(request)
    check_csrf(request, form)
    source = first(form, "source").strip()
    try:
        body = artifacts_service.RegisterRequest(source=source)
    except ValidationError as exc:
        return render(request, "artifact_new.html", status_code=422, principal=principal, source=source,
                      proposal=None, error=refusal_words(exc))
    try:
        # The API's register: it resolves again (pinning the branch to a commit) and starts the
        # workflow, so a proposal read minutes ago cannot register a commit that moved since.
        registered = await artifacts_service.register(body, principal=principal, db=db, temporal=temporal,
                                                      settings=settings, proposals=proposals,
                                                      approvers=tokens.names_with("approver"))
    except ApiError as err:
        return render(request, "artifact_new.html", status_code=err.status, principal=principal, source=source,
                      proposal=None, error=err.message)
    return redirect(draft_path(registered.id) + ("?registered=1" if registered.started else "?registered=0"))

"""Workload pages: the list, and one workload's clusters, events, links and upgrade progress, with the
scale, delete and pause/resume/abort forms for operators. Reads and changes go through the services the REST
routes call (api/services/workloads.py), so the console and the API say the same thing and refuse the same
things."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast, get_args
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from pydantic import BaseModel, ValidationError

from api.deps import DbDep, SettingsDep, TemporalDep, temporal_or_none
from api.errors import ApiError
from api.responses import answer_fields
from api.services import autoscaling as autoscaling_service
from api.services import workloads as workloads_service
from api.services.workloads import ControlBody, ScaleBody, UpgradeVerb
from console.artifacts import draft_path
from console.autoscaling import ApprovalForm, autoscale_view, decision_marks, target_levels
from console.events import EventLine, event_groups, operation_of, operation_of_note
from console.forms import refusal_words
from console.predicted import predicted_for
from console.rendering import ConsoleRoute, first, read_form, redirect, render
from console.session import ConsoleApprover, ConsoleOperator, ConsoleViewer, check_csrf
from console.traffic_charts import WINDOW_SECONDS, traffic_section
from console.upgrade_timeline import upgrade_timelines
from console.views import LAYOUT_WORDS
from contracts import conditions as reason
from wingsmith.adapters.store import artifacts as artifact_store
from wingsmith.adapters.store import workloads as workload_store

router = APIRouter(route_class=ConsoleRoute)

# A cluster's phase in words; the keys are the workflow's ClusterState states and the registry's
# deployment states (the registry also records `applied`, between apply and ready).
PHASE_WORDS = {
    "pending": "waiting its turn (the canary goes first)",
    "rolling_out": "rolling out: graph applied, waiting until it serves",
    "applied": "graph applied, waiting until ready",
    "serving": "ready and serving",
    "degraded": "not serving: the watch found it wrong (see the problem), healing or waiting out the grace",
    "failed": "failed",
    "deleting": "being removed",
    "deleted": "removed",
}

STAGE_WORDS = {
    "planning": "being checked against its approved draft", "placing": "choosing clusters",
    "rolling_out": "rolling out", "serving": "serving", "scaling": "changing its replicas",
    "degraded": "degraded: serving less than asked (a cluster's problem is shown below)",
    "deleting": "being deleted (endpoints drain first)", "deleted": "deleted", "failed": "failed",
}

# Workloads an endpoint may route to: the API refuses deleted and failed ones; ones still rolling out
# are allowed (the gateway adds each cluster once it serves). The create and change forms offer these.
OFFERED_STATES = ("serving", "rolling_out", "placing", "planning", "scaling")

# Stages in which a scale or delete would be refused or meaningless, so the page offers neither.
_SETTLED_OUT = {"deleting", "deleted"}


class ClusterRow(BaseModel):
    cluster: str
    dgd_name: str | None
    namespace: str | None
    phase: str
    phase_words: str
    ready: bool
    replicas: int
    frontend_url: str | None
    generation: int | None
    problem: str | None


# `when` is to the second (several steps often land in one minute); `source` is "registry" (the audit
# trail) or "workflow" (the workflow's own notes).
EventRow = EventLine


def cluster_rows(deployments: list[dict[str, Any]], live: dict[str, Any] | None) -> list[ClusterRow]:
    """One row per cluster: the workflow's view (current) over the registry's (what was recorded),
    so a cluster still shows while the workflow is unreachable or already gone."""
    recorded = {d["cluster"]: d for d in deployments}
    current = {c["cluster"]: c for c in (live or {}).get("clusters", [])}
    rows = []
    for name in sorted(recorded.keys() | current.keys()):
        d, c = recorded.get(name, {}), current.get(name, {})
        detail = d.get("detail") or {}
        phase = c.get("state") or d.get("state") or "pending"
        rows.append(ClusterRow(
            cluster=name, dgd_name=c.get("dgd_name") or d.get("dgd_name"), namespace=d.get("namespace"),
            phase=phase, phase_words=PHASE_WORDS.get(phase, phase.replace("_", " ")), ready=phase == "serving",
            replicas=c.get("replicas", d.get("replicas", 0)),
            frontend_url=c.get("frontend_url") or d.get("frontend_url"), generation=detail.get("generation"),
            problem=c.get("error") or detail.get("cause") or c.get("drift")))
    return rows


def event_rows(events: list[dict[str, Any]], notes: list[str],
               timeline: list[dict[str, Any]] | None = None) -> list[EventRow]:
    """The registry's audit trail and the workflow's own events on one time line, oldest first.

    With the workflow's typed `timeline`, a step both sides recorded (a cluster serving, failing, removed;
    a heal; a placement) is shown once, in the workflow's words, which say more (the frontend, the
    cause, the heal's times); the registry's row stays for steps the workflow no longer holds (it keeps
    its last events only) and after the workflow is gone. Without it, the prose `notes` are merged."""
    workflow_rows = (_timeline_rows(timeline) if timeline is not None else _note_rows(notes))
    twins = _twin_marks(timeline or [])
    rows = [EventRow(at=e.get("at"), when=_seconds(e.get("at")),
                     what=_event_words(e.get("kind", ""), e.get("detail") or {}),
                     who=e.get("actor"), source="registry",
                     operation=operation_of(e.get("kind", ""), e.get("step") or "", e.get("detail") or {}))
            for e in events if not _has_twin(e, twins)]
    rows.extend(workflow_rows)
    epoch = datetime.min.replace(tzinfo=UTC)
    # The workflow stamps its notes to the second, so compare at that resolution; the stable sort then
    # keeps the registry's rows (written in order) ahead of the notes made in the same second.
    return sorted(rows, key=lambda r: (_aware(r.at) or epoch).replace(microsecond=0))


def _note_rows(notes: list[str]) -> list[EventRow]:
    rows = []
    for note in notes:
        stamp, _, text = note.partition(" ")
        at = _parse_time(stamp)
        what = text if at else note
        rows.append(EventRow(at=at, when=_seconds(at), what=what, who=None, source="workflow",
                             operation=operation_of_note(what)))
    return rows


def _timeline_rows(timeline: list[dict[str, Any]]) -> list[EventRow]:
    rows = []
    for e in timeline:
        at = _when(e.get("time"))
        what = str(e.get("message") or "")
        rows.append(EventRow(at=at, when=_seconds(at), what=what, who=None, source="workflow",
                             operation=operation_of_note(what)))
    return rows


# The registry kind each workflow event reason records for the same step (contracts/conditions.py).
_TWIN_KIND = {reason.CLUSTER_SERVING: "deployment_serving", reason.CLUSTER_FAILED: "deployment_failed",
              reason.CLUSTER_REMOVED: "deployment_deleted", reason.HEALED: "workload_healed",
              reason.PLACED: "placement"}
# The two sides stamp one step from two clocks (workflow time, the database's now()), seconds apart.
_TWIN_SECONDS = 5.0


def _twin_marks(timeline: list[dict[str, Any]]) -> list[tuple[str, str | None, datetime]]:
    marks = []
    for e in timeline:
        kind = _TWIN_KIND.get(str(e.get("reason")))
        at = _when(e.get("time"))
        if kind and at:
            marks.append((kind, (e.get("detail") or {}).get("cluster"), at))
    return marks


def _has_twin(event: dict[str, Any], twins: list[tuple[str, str | None, datetime]]) -> bool:
    at = _when(event.get("at"))
    if at is None:
        return False
    cluster = (event.get("detail") or {}).get("cluster")
    return any(kind == event.get("kind") and (cluster is None or c == cluster)
               and abs((at - when).total_seconds()) <= _TWIN_SECONDS for kind, c, when in twins)


def _event_words(kind: str, detail: dict[str, Any]) -> str:
    words = kind.replace("_", " ")
    facts = []
    if detail.get("cluster"):
        facts.append(f"on {detail['cluster']}")
    if "replicas" in detail and not isinstance(detail["replicas"], dict):
        facts.append(f"{detail['replicas']} replica(s)")
    if detail.get("summary"):
        facts.append(str(detail["summary"]))
    if detail.get("cause"):
        facts.append(str(detail["cause"]))
    if kind == "workload_healed":
        facts.extend(heal_times(detail))
    return words + (": " + ", ".join(facts) if facts else "")


def heal_times(detail: dict[str, Any]) -> list[str]:
    """A heal's times as the registry keeps them (issue 34): from when the plane saw the fault, and from the
    fault itself, exactly when the cluster stamped it, else at most (since the last look that found it well)."""
    said = [f"{detail['seconds']} s from when it was seen"] if detail.get("seconds") is not None else []
    served = _when(detail.get("served_at"))
    fault, after = _when(detail.get("fault_at")), _when(detail.get("fault_after"))
    if served and fault:
        said.append(f"{(served - fault).total_seconds():.1f} s from the fault")
    elif served and after:
        said.append(f"from the fault at most {(served - after).total_seconds():.1f} s")
    return said


def _when(value: Any) -> datetime | None:
    """A time from a status or an event, whether still a datetime or already JSON text."""
    return _aware(value if isinstance(value, datetime) else _parse_time(str(value or "")))


def _parse_time(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds(at: datetime | None) -> str:
    aware = _aware(at)
    return aware.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if aware else ""


def _aware(at: datetime | None) -> datetime | None:
    if at is not None and at.tzinfo is None:
        return at.replace(tzinfo=UTC)
    return at


def failure_sentence(cause: str | None) -> str:
    """Why a workload failed, in one sentence (its list row once read just "failed failed")."""
    if not cause:
        return "Failed without a recorded cause; its events on the workload page say what happened."
    first_line = cause.strip().splitlines()[0].rstrip(". ")
    return f"Failed: {first_line}."


def _last_failure(events: list[dict[str, Any]]) -> str | None:
    causes = [(e.get("detail") or {}).get("cause") for e in events if e.get("kind") == "workload_failed"]
    return next((c for c in reversed(causes) if c), None)


UPGRADE_WORDS = {
    "running": "running", "paused": "paused (it holds after its current step)", "succeeded": "succeeded",
    "rolled_back": "rolled back by itself", "aborted": "aborted and rolled back", "failed": "failed and rolled back",
}
_CONTROLS = get_args(UpgradeVerb)


class FigureRow(BaseModel):
    """One compared figure of the last window: the new version next to the old one."""

    what: str
    new: str
    old: str


def upgrade_figures(figures: dict[str, Any] | None) -> list[FigureRow]:
    if not figures:
        return []

    def ms(v: Any) -> str:
        return "—" if v is None else f"{float(v) * 1000:.1f} ms"

    def rate(v: Any) -> str:
        return "—" if v is None else f"{float(v):.1%}"
    f = figures
    return [FigureRow(what="requests", new=str(f.get("new_requests", "—")), old=str(f.get("old_requests", "—"))),
            FigureRow(what="error rate", new=rate(f.get("new_error_rate")), old=rate(f.get("old_error_rate"))),
            FigureRow(what="p99 latency", new=ms(f.get("new_p99_seconds")), old=ms(f.get("old_p99_seconds"))),
            FigureRow(what="p99 time to first token", new=ms(f.get("new_ttft_p99_seconds")),
                      old=ms(f.get("old_ttft_p99_seconds")))]


def workload_path(workload_id: str) -> str:
    return "/console/workloads/" + quote(workload_id, safe="")


@router.get("/workloads")
async def workload_list(request: Request, principal: ConsoleViewer, db: DbDep):
    listed = [answer_fields(w) for w in await workloads_service.list_workloads(principal, db=db, limit=500)]
    failed = [w["id"] for w in listed if w["state"] == "failed"]
    causes = await workload_store.failure_causes(db, failed) if failed else {}
    return render(request, "workloads.html", principal=principal, workloads=listed, causes=causes,
                  failure_sentence=failure_sentence, stage_words=STAGE_WORDS, phase_words=PHASE_WORDS,
                  draft_path=draft_path, workload_path=workload_path)


async def _workload_page(request: Request, workload_id: str, principal, db, settings, *, status_code: int = 200,
                         error: str | None = None):
    w = answer_fields(await workloads_service.get_workload(workload_id, viewer=principal, db=db, settings=settings,
                                                           temporal=temporal_or_none(request.app.state)))
    live = w.get("live") or None
    spec = w.get("spec") or {}
    stage = (live or {}).get("stage") or w.get("state") or "unknown"
    clusters = cluster_rows(w.get("deployments") or [], live)
    replicas = (live or {}).get("replicas", spec.get("replicas"))
    artifact = await artifact_store.get_artifact(db, w["artifact_id"]) if w.get("artifact_id") else None
    predicted = predicted_for((artifact or {}).get("draft"), spec)
    now = datetime.now(UTC)
    temporal = temporal_or_none(request.app.state)
    shown = await autoscaling_service.show(workload_id, viewer=principal, db=db, temporal=temporal,
                                           settings=settings, limit=2)
    changes = await autoscaling_service.changes(workload_id, viewer=principal, db=db,
                                                since=now - timedelta(seconds=WINDOW_SECONDS))
    autoscale = autoscale_view(shown, changes)
    traffic = await traffic_section(db, settings, workload_id=workload_id, now=now,
                                    predicted_ttft_ms=predicted.row.ttft_ms if predicted and predicted.row else None,
                                    marks=decision_marks(autoscale, changes), levels=target_levels(autoscale.policy))
    timelines = upgrade_timelines(w.get("events") or [], (live or {}).get("timeline") if live else None,
                                  w.get("upgrade"), traffic.end)
    return render(
        request, "workload.html", status_code=status_code, principal=principal, w=w, live=live, spec=spec,
        stage=stage, stage_words=STAGE_WORDS.get(stage, stage), clusters=clusters,
        conditions=(live or {}).get("conditions") or [],
        failure=(live or {}).get("failure") or (_last_failure(w.get("events") or []) if stage == "failed" else None),
        serving_replicas=sum(c.replicas for c in clusters if c.ready), replicas=replicas,
        layout_words=LAYOUT_WORDS.get(spec.get("layout", ""), ""),
        events=event_groups(event_rows(w.get("events") or [], (live or {}).get("events") or [],
                                           (live or {}).get("timeline") if live else None)),
        artifact_path=draft_path(w["artifact_id"]) if w.get("artifact_id") else None,
        can_change=principal.has("operator") and stage not in _SETTLED_OUT, error=error,
        scaled=request.query_params.get("scaled"), created=request.query_params.get("created"),
        deleting=request.query_params.get("deleting"), upgrade=w.get("upgrade"), upgrade_words=UPGRADE_WORDS,
        upgrade_figures=upgrade_figures, controlled=request.query_params.get("upgrade"),
        page_path=workload_path(workload_id), traffic=traffic, predicted=predicted, timelines=timelines,
        autoscale=autoscale, approved=request.query_params.get("autoscale"))


@router.get("/workloads/{workload_id}")
async def workload_page(request: Request, workload_id: str, principal: ConsoleViewer, db: DbDep,
                        settings: SettingsDep):
    return await _workload_page(request, workload_id, principal, db, settings)


@router.post("/workloads/{workload_id}/scale")
async def scale(request: Request, workload_id: str, principal: ConsoleOperator, db: DbDep, settings: SettingsDep,
                temporal: TemporalDep):
    form = await read_form(request)
    check_csrf(request, form)
    raw = first(form, "replicas").strip()
    try:
        body = ScaleBody(replicas=raw)
    except ValidationError:
        return await _workload_page(request, workload_id, principal, db, settings, status_code=422,
                                    error=f"Replicas must be a whole number from 1 to 256; {raw or 'nothing'!r} "
                                          "is not.")
    try:
        # The same update, validation and refusal words as PATCH /v1/workloads/{id}.
        status = await workloads_service.scale(workload_id, body.replicas, principal=principal, db=db,
                                               temporal=temporal)
    except ApiError as err:
        return await _workload_page(request, workload_id, principal, db, settings, status_code=err.status,
                                    error=err.message)
    return redirect(workload_path(workload_id) + "?" + urlencode({"scaled": status.replicas}))


@router.post("/workloads/{workload_id}/delete")
async def delete(request: Request, workload_id: str, principal: ConsoleOperator, db: DbDep, settings: SettingsDep,
                 temporal: TemporalDep):
    form = await read_form(request)
    check_csrf(request, form)
    try:
        await workloads_service.delete(workload_id, principal=principal, db=db, temporal=temporal)
    except ApiError as err:
        return await _workload_page(request, workload_id, principal, db, settings, status_code=err.status,
                                    error=err.message)
    return redirect(workload_path(workload_id) + "?deleting=1")


@router.post("/workloads/{workload_id}/upgrade/{action}")
async def upgrade_control(request: Request, workload_id: str, action: str, principal: ConsoleOperator, db: DbDep,
                          settings: SettingsDep, temporal: TemporalDep):
    """Pause, resume or abort the running upgrade, as the API's routes do."""
    form = await read_form(request)
    check_csrf(request, form)
    if action not in _CONTROLS:
        return await _workload_page(request, workload_id, principal, db, settings, status_code=404,
                                    error=f"An upgrade can be paused, resumed or aborted, not {action!r}.")
    try:
        body = ControlBody(reason=first(form, "reason") or None)
        await workloads_service.control_upgrade(workload_id, cast(UpgradeVerb, action), body.reason,
                                                principal=principal, db=db, temporal=temporal)
    except ApiError as err:
        return await _workload_page(request, workload_id, principal, db, settings, status_code=err.status,
                                    error=err.message)
    return redirect(workload_path(workload_id) + "?" + urlencode({"upgrade": action}))


@router.post("/workloads/{workload_id}/autoscaling/approve")
async def approve_scale(request: Request, workload_id: str, principal: ConsoleApprover, db: DbDep,
                        settings: SettingsDep, temporal: TemporalDep):
    """Approve (or reject) the autoscaler's scale-out waiting past the team's budget, as
    `POST /v1/workloads/{id}/autoscaling/approve` does."""
    form = await read_form(request)
    check_csrf(request, form)
    try:
        body = ApprovalForm.model_validate({"tick": first(form, "tick").strip(), "decision": first(form, "decision"),
                                            "comment": first(form, "comment")})
    except ValidationError as exc:
        return await _workload_page(request, workload_id, principal, db, settings, status_code=422,
                                    error=refusal_words(exc))
    try:
        await autoscaling_service.approve(workload_id, body.tick, approve=body.decision == "approve",
                                          comment=body.comment,
                                          principal=principal, db=db, temporal=temporal)
    except ApiError as err:
        return await _workload_page(request, workload_id, principal, db, settings, status_code=err.status,
                                    error=err.message)
    return redirect(workload_path(workload_id) + "?" + urlencode({"autoscale": body.decision}))

"""Workloads: what a person asks to run (engine, hardware, layout, scale, variant, features), checked
against the approved draft, and turned into a plan every cluster can render from. Pure functions;
the API validates with them (422, nothing started) and the workload workflow carries the plan."""

from __future__ import annotations

import re
import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from wingsmith.domain.autoscaling import AutoscalingPolicy
from wingsmith.domain.dynamo import Engine, Layout, RolloutSpec, WorkerPool
from wingsmith.domain.dynamo import engine_args as ea
from wingsmith.domain.dynamo.ranks import ranks_problem
from wingsmith.domain.hardware import UnknownHardware, get_hardware
from wingsmith.domain.perf.estimates import Configuration, Pool, Source
from wingsmith.domain.perf.traffic import CardPlan, TrafficTarget
from wingsmith.domain.placement.models import PlacementConstraints, PlacementPlan
from wingsmith.domain.recipes import Catalog, InvalidChoice, Recipe, ServeCommand, serve_command
from wingsmith.domain.recipes.concurrency import max_num_seqs_applied
from wingsmith.domain.reconcile import DriftPolicy
from wingsmith.domain.sizing import SizingError, fit_check
from wingsmith.domain.sizing.fit import smallest_fitting_gpus
from wingsmith.domain.text import MAX_LIST, NameText, ServedModelName, SourceText

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")

# Whether approving a newer draft of the same repository upgrades this workload by itself (`auto`) or
# only tells its owners (`manual`).
Follow = Literal["manual", "auto"]


class InvalidWorkload(ValueError):
    """A workload that cannot run as asked; the message says why in the user's words."""

    def __init__(self, message: str, *, field: str | None = None, details: dict | None = None):
        super().__init__(message)
        self.field = field
        self.details = details or {}


class WorkloadRequest(BaseModel):
    artifact_id: SourceText = Field(description="<org>/<name>@<sha> of an approved artifact")
    name: NameText | None = Field(default=None, description="workload id (DNS label); generated when absent. "
                             "Repeating a create with the same name returns the same workload.")
    engine: NameText = "vllm"
    hardware: NameText = Field(description="h100, h200, b200, b300, gb200, gb300")
    layout: NameText = "single_node_tp"
    replicas: int = Field(default=1, ge=1, le=256)
    variant: NameText = Field(default="default", description="the recipe variant to run; when not given, the "
                              "variant the artifact's checkpoint is (matched by its exact id, then its precision)")
    features: list[NameText] = Field(default_factory=list, max_length=MAX_LIST,
                                     description="opt-in features to enable")
    gpus: int | None = Field(default=None, ge=1, description="GPUs per replica; default: the layout's minimum")
    constraints: PlacementConstraints = Field(default_factory=PlacementConstraints)
    served_model_name: ServedModelName | None = Field(
        default=None, description="the model name clients send: letters, digits and . _ : / @ + -, at most 256")
    context: int = Field(default=8192, ge=256, description="context length the fit check uses")
    concurrency: int = Field(default=16, ge=1, description="concurrent sequences the fit check uses")
    drift: DriftPolicy = Field(default="heal", description="a DGD edited outside the plane is put back (`heal`) "
                               "or only reported (`report`); a missing one is always re-applied")
    follow: Follow = Field(default="manual", description="`auto`: approving a newer draft of this repository "
                           "(a new commit, or new recipe evidence) starts this workload's progressive upgrade; "
                           "`manual`: it only records that a newer approved version exists")
    target: TrafficTarget | None = Field(
        default=None, description="instead of `replicas`: the traffic to serve (requests_per_second, isl, osl, "
        "ttft_ms, tpot_ms); the plane asks AIConfigurator for the smallest configuration per card that meets the "
        "latencies and counts the replicas the rate needs (docs/planning-by-load.md)")
    autoscaling: AutoscalingPolicy | None = Field(
        default=None, description="scale by itself within these bounds to hold these targets (docs/autoscaling.md); "
        "with a traffic target, the plan's TTFT and TPOT are the targets unless given here")
    dry_run: bool = False

    @model_validator(mode="after")
    def _replicas_or_target(self) -> WorkloadRequest:
        if self.target is not None and ("replicas" in self.model_fields_set or "gpus" in self.model_fields_set):
            raise ValueError("give either replicas (and gpus) or a traffic target, not both: the target decides them")
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.match(value):
            raise ValueError("name must be a DNS label: lower-case letters, digits and '-', at most 40")
        return value


class ApprovedArtifact(BaseModel):
    """What the registry knows about an artifact that a workload is checked against."""
    id: str
    repo_id: str
    sha: str
    state: str
    superseded_by: str | None = None
    draft_version: int
    evidence: dict[str, Any]
    config: dict[str, Any]
    weight_bytes: int | None
    # The draft's sizing of each variant (its checkpoint may be another repo, with other bytes).
    variant_weight_bytes: dict[str, int] = Field(default_factory=dict)
    catalog_version: str | None = Field(default=None, description="the recipe catalog the draft's evidence came "
                                        "from: plans read their serve command there")

    def weights_for(self, variant: str) -> int | None:
        return self.variant_weight_bytes.get(variant) or (self.weight_bytes if variant == "default" else None)


class SizedBy(BaseModel, frozen=True):
    """What a workload sized from a traffic target was sized by: the target (with its ISL/OSL) and the
    configuration AIConfigurator chose for it (card, mode, one pool or a prefill and a decode pool with their
    parallelism and batch sizes, the predicted TTFT, TPOT and throughput). An upgrade runs the same
    configuration on the new artifact; the workload page shows its prediction. A few hundred bytes."""
    target: TrafficTarget
    card: str
    configuration: Configuration
    replicas: int = Field(ge=1, description="the replicas the target needed (a later scale changes the plan's)")
    gpus: int = Field(ge=1, description="GPUs those replicas use together")
    source: Source | None = None

    @field_validator("configuration")
    @classmethod
    def _pools(cls, conf: Configuration) -> Configuration:
        pools = 1 if conf.mode == "agg" else 2  # one aggregated pool, or a prefill and a decode pool
        if len(conf.workers) != pools:
            raise ValueError(f"an {conf.mode} configuration has {pools} worker pools, not {len(conf.workers)}")
        return conf

    @classmethod
    def of(cls, chosen: CardPlan) -> SizedBy:
        assert chosen.configuration is not None  # a chosen plan meets the target, so it has a configuration
        return cls(target=chosen.target, card=chosen.card, configuration=chosen.configuration,
                   replicas=chosen.replicas, gpus=chosen.gpus, source=chosen.source)

    def card_plan(self) -> CardPlan:
        """The chosen plan again, as the planner takes it."""
        return CardPlan(card=self.card, target=self.target, source=self.source, configuration=self.configuration,
                        replicas=self.replicas, gpus=self.gpus, meets_target=True)

    def __str__(self) -> str:
        return f"{self.card}, {self.configuration.mode}, {self.configuration.parallelism}"


class WorkloadPlan(BaseModel):
    workload_id: str
    artifact_id: str
    artifact_sha: str
    draft_version: int
    hf_model_id: str
    hf_revision: str | None
    served_model_name: str
    engine: str
    hardware: str
    layout: str
    variant: str
    features: list[str]
    replicas: int
    gpus_per_replica: int
    worker: WorkerPool
    prefill: WorkerPool | None = None
    env: dict[str, str] = Field(default_factory=dict)
    max_num_seqs: int | None = None
    max_num_seqs_source: str = "engine default"
    image: str
    namespace: str
    hf_token_secret: str | None = None
    weight_bytes: int | None = None
    placement: PlacementPlan
    fit: dict[str, Any]
    drift: DriftPolicy = "heal"
    revision: int = Field(default=0, ge=0, description="bumped by each upgrade: the DGDs of this plan are named "
                          "with it (`wingsmith.domain.dynamo.dgd_name`)")
    follow: Follow = "manual"
    sized_by: SizedBy | None = Field(default=None, description="a workload sized from a traffic target: the target "
                                     "and the configuration AIConfigurator chose, which upgrades keep")

    def rollout_spec(self, cluster: str, replicas: int) -> RolloutSpec:
        """The per-cluster rendering input: the same plan, with this cluster's share of replicas."""
        # Each pool keeps its workers per replica (a disaggregated replica's prefill-to-decode ratio).
        worker = self.worker.model_copy(update={"replicas": replicas})
        prefill = self.prefill.model_copy(update={"replicas": replicas}) if self.prefill else None
        return RolloutSpec(
            workload_id=self.workload_id, cluster=cluster, revision=self.revision, artifact_id=self.artifact_id,
            artifact_sha=self.artifact_sha, draft_version=self.draft_version,
            served_model_name=self.served_model_name, hf_model_id=self.hf_model_id, hf_revision=self.hf_revision,
            engine=Engine(self.engine), layout=Layout(self.layout), hardware_id=self.hardware, worker=worker,
            prefill=prefill, max_num_seqs=self.max_num_seqs, max_num_seqs_source=self.max_num_seqs_source,
            env=self.env, image=self.image, namespace=self.namespace, hf_token_secret=self.hf_token_secret)


def new_workload_id(repo_id: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", repo_id.split("/")[-1].lower()).strip("-")[:30] or "model"
    return f"{slug}-{uuid.uuid4().hex[:6]}"


def approved_artifact_from_row(row) -> ApprovedArtifact:
    """The registry's artifact row (with its latest draft) as the planner needs it."""
    proposal = row["proposal"] or {}
    sizing = (row["sizing"] or {}).get("sizing", [])
    return ApprovedArtifact(
        id=row["id"], repo_id=row["repo_id"], sha=row["sha"], state=row["state"], superseded_by=row["superseded_by"],
        draft_version=row["draft_version"] or 0, evidence=row["evidence"] or {}, config=proposal.get("config") or {},
        weight_bytes=proposal.get("weight_bytes"),
        variant_weight_bytes={s["variant"]: s["weight"]["bytes"] for s in sizing if s.get("weight")},
        catalog_version=row.get("catalog_version"))


def check_artifact(artifact: ApprovedArtifact | None, artifact_id: str) -> ApprovedArtifact:
    if artifact is None:
        raise InvalidWorkload(f"artifact {artifact_id} not found; register it first", field="artifact_id")
    if artifact.state != "approved":
        raise InvalidWorkload(f"artifact {artifact.id} is {artifact.state}, not approved: a person must approve "
                              "its draft before anything is deployed", field="artifact_id")
    if artifact.superseded_by:
        raise InvalidWorkload(f"artifact {artifact.id} was superseded by {artifact.superseded_by}; deploy that one",
                              field="artifact_id")
    return artifact


def plan_workload(request: WorkloadRequest, artifact: ApprovedArtifact, catalog: Catalog, *, image: str,
                  namespace: str, hf_token_secret: str | None, workload_id: str | None = None) -> WorkloadPlan:
    """Validate a request against the approved draft and return the plan, or raise InvalidWorkload."""
    check_artifact(artifact, request.artifact_id)
    if request.engine != "vllm":
        raise InvalidWorkload(f"engine {request.engine!r} is not supported yet; use vllm", field="engine")
    try:
        card = get_hardware(request.hardware)
    except UnknownHardware as exc:
        raise InvalidWorkload(str(exc), field="hardware") from None
    if not card.placeable:
        raise InvalidWorkload(f"{card.display_name} is {card.vendor} hardware; Wingsmith serves through NVIDIA "
                              "Dynamo and places NVIDIA hardware only", field="hardware")
    status = {h["id"]: h["status"] for h in artifact.evidence.get("hardware", [])}
    if status.get(card.id) == "unsupported":
        raise InvalidWorkload(f"the recipe marks {card.display_name} unsupported for {artifact.repo_id}",
                              field="hardware")
    match = catalog.find(artifact.repo_id)
    if match is None:
        raise InvalidWorkload(f"no recipe for {artifact.repo_id}: the plane has no tested command to run",
                              field="artifact_id")
    if "variant" not in request.model_fields_set:
        # The variant this artifact's checkpoint is (its exact id first, as the approved draft matched it), so a
        # workload serves the checkpoint that was approved rather than the recipe's default variant's.
        matched = artifact.evidence.get("matched_variant") or match.variant
        request = request.model_copy(update={"variant": matched})
    try:
        command = serve_command(match.recipe, request.variant, card.id, request.layout, request.features,
                                gpus=request.gpus, catalog=catalog)
        command = _smallest_that_fits(request, artifact, command, match.recipe, catalog)
    except InvalidChoice as exc:
        raise InvalidWorkload(str(exc), field="layout/features") from None
    fit = _fit(request, artifact, command)
    worker, prefill = _pools(command)
    applied, source = max_num_seqs_for(command, artifact.repo_id, card.id, catalog)
    if applied is not None and "--max-num-seqs" not in worker.args:
        worker = worker.model_copy(update={"args": [*worker.args, "--max-num-seqs", str(applied)]})
    variant = next((v for v in artifact.evidence.get("variants", []) if v["name"] == request.variant), None)
    checkpoint = variant["checkpoint"] if variant else artifact.repo_id
    own = checkpoint.lower() == artifact.repo_id.lower()
    # One pod per node of a worker; a prefill and a decode pool of one replica share nodes where they fit.
    gpus_per_node, nodes = (replica_set_nodes([worker.gpus_per_replica, prefill.gpus_per_replica], card.gpus_per_node)
                            if prefill else (worker.gpus_per_node, worker.nodes))
    return _checked_ranks(WorkloadPlan(
        workload_id=workload_id or request.name or new_workload_id(artifact.repo_id), artifact_id=artifact.id,
        artifact_sha=artifact.sha, draft_version=artifact.draft_version, hf_model_id=checkpoint,
        hf_revision=artifact.sha if own else None,
        served_model_name=request.served_model_name or artifact.repo_id.split("/")[-1].lower(),
        engine=request.engine, hardware=card.id, layout=request.layout, variant=request.variant,
        features=sorted(command.features), replicas=request.replicas, gpus_per_replica=command.gpus,
        worker=worker, prefill=prefill, env=dict(command.env), max_num_seqs=applied, max_num_seqs_source=source,
        image=image, namespace=namespace, hf_token_secret=hf_token_secret,
        weight_bytes=artifact.weights_for(request.variant),
        placement=PlacementPlan(hardware=card.id, gpus_per_node=gpus_per_node, nodes_per_replica=nodes,
                                replicas=request.replicas, constraints=request.constraints),
        fit=fit, drift=request.drift, follow=request.follow))


def _smallest_that_fits(request: WorkloadRequest, artifact: ApprovedArtifact, command: ServeCommand, recipe: Recipe,
                        catalog: Catalog) -> ServeCommand:
    """With no GPU count asked for and none pinned by the recipe, the one-node command at the smallest count, from
    the recipe's (the fewest that hold its floor) up to the whole node, that the model's heads divide and the
    plane's fit check holds at the request's context and concurrency: TP as small as memory allows."""
    weight_bytes = artifact.weights_for(request.variant)
    if request.gpus is not None or command.pin or command.nodes > 1 or command.layout == "pd_cluster" \
            or not weight_bytes or not artifact.config:
        return command
    node = command.gpus_per_node
    counts = [n for n in range(command.gpus, node + 1) if node % n == 0]
    try:
        choice = smallest_fitting_gpus(artifact.config, weight_bytes, command.hardware, command.layout, counts,
                                       request.context, request.concurrency)
    except SizingError:
        return command  # the fit check below says why
    if choice.gpus is None or choice.gpus == command.gpus:
        return command
    bigger = serve_command(recipe, request.variant, command.hardware, command.layout, request.features,
                           gpus=choice.gpus, catalog=catalog)
    return bigger.model_copy(update={"shape_reason": f"{command.shape_reason}; the plane's own check: {choice.reason}"})


def _fit(request: WorkloadRequest, artifact: ApprovedArtifact, command: ServeCommand) -> dict[str, Any]:
    weight_bytes = artifact.weights_for(request.variant)
    if not weight_bytes:
        return {"checked": False, "reason": f"the draft has no weight bytes for the {request.variant} variant"}
    try:
        report = fit_check(artifact.config, weight_bytes, command.hardware, command.layout, command.gpus,
                           request.context, request.concurrency)
    except SizingError as exc:
        raise InvalidWorkload(f"cannot size this shape: {exc}", field="layout") from None
    summary = {"checked": True, "fits": report.fits, "verdict": report.verdict, "gpus": command.gpus,
               "headroom_gb": report.headroom_gb, "context": request.context, "concurrency": request.concurrency,
               # what the KV cache holds at that context: set beside the engine's --max-num-seqs on the pages
               "largest_concurrency": report.largest_concurrency}
    if not report.fits:
        raise InvalidWorkload(
            f"{artifact.repo_id} does not fit {command.gpus} × {command.hardware} in {command.layout} at context "
            f"{request.context} and concurrency {request.concurrency}: {report.verdict.replace('_', ' ')}, short by "
            f"{-report.headroom_gb:.1f} GB per GPU", field="hardware", details={"fit": report.model_dump(mode="json")})
    return summary


def _pools(command: ServeCommand) -> tuple[WorkerPool, WorkerPool | None]:
    """One pod per node; a pod asks for the GPUs its share of the replica uses on that node (a
    single-node replica or pool smaller than the node takes only its GPUs, leaving the rest to others)."""
    def pool(role_commands) -> WorkerPool:
        first = role_commands[0]
        return WorkerPool(args=list(first.args), gpus_per_node=first.gpus, nodes=len(role_commands),
                          env=dict(first.env))
    if command.layout == "pd_cluster":
        return (pool([c for c in command.commands if c.role == "decode"]),
                pool([c for c in command.commands if c.role == "prefill"]))
    return pool(command.commands), None


def rank_problem(plan: WorkloadPlan) -> str | None:
    """Why a plan's engine commands ask for other ranks than its pools reserve (wingsmith.domain.dynamo.ranks),
    or None."""
    for role, pool in (("worker", plan.worker), ("prefill", plan.prefill)):
        if pool is not None and (problem := ranks_problem(plan.engine, pool.args, gpus_per_node=pool.gpus_per_node,
                                                          nodes=pool.nodes)):
            return f"the {role} pool: {problem}"
    return None


def _checked_ranks(plan: WorkloadPlan) -> WorkloadPlan:
    if problem := rank_problem(plan):
        raise InvalidWorkload(f"this shape cannot start: {problem}", field="layout")
    return plan


def max_num_seqs_for(command: ServeCommand, repo_id: str, card: str, catalog: Catalog) -> tuple[int | None, str]:
    """The one default the plane applies: --max-num-seqs from Dynamo's aggregated recipe for the card.
    A tested vLLM recipe flag that already sets it wins and is named as the source instead."""
    default = max_num_seqs_applied(command, repo_id, catalog)
    if default.origin == "vllm recipe":
        return default.value, f"the vLLM recipe {command.recipe} sets it"
    if default.value is None:
        return None, default.reason
    return default.value, f"{default.source_path}@{(default.source_commit or '')[:12]}"


def sized_by_target(request: WorkloadRequest, chosen: CardPlan) -> WorkloadRequest:
    """The request a traffic target's chosen plan stands for: its card, its replicas, its GPUs per replica.
    A disaggregated plan starts from the recipe's command for one decode worker (its tested flags, which
    both pools then run with, on one node or, for a worker larger than a node, on its whole nodes): the side
    that holds every answer's KV cache is the one the plane's fit check sizes, as it does for pd_cluster."""
    conf = chosen.configuration
    assert conf is not None  # a chosen plan meets the target, so it has a configuration
    if conf.mode == "agg":
        sized = {"hardware": chosen.card, "replicas": chosen.replicas, "gpus": conf.gpus_per_replica}
        # A replica larger than a node spans nodes (Kimi-K3's TP16 on 8-GPU H200 nodes): a single-node layout,
        # the request's default, cannot hold it, where the layout the request named otherwise stands.
        if conf.gpus_per_replica > get_hardware(chosen.card).gpus_per_node and not request.layout.startswith(
                "multi_node"):
            sized["layout"] = "multi_node_tp"
        return request.model_copy(update=sized)
    decode = conf.workers[-1].gpus_per_worker
    one_node = decode <= get_hardware(chosen.card).gpus_per_node
    return request.model_copy(update={"hardware": chosen.card, "replicas": chosen.replicas, "gpus": decode,
                                      "layout": "single_node_tp" if one_node else "multi_node_tp"})


# Dynamo's vLLM disaggregated recipes (recipes/llama-3-70b/vllm/disagg-single-node, recipes/qwen3-32b/vllm/
# disagg-kv-router) and AIConfigurator's own generated graphs move the KV cache from prefill to decode workers
# with NIXL, every worker on both sides of it; the renderer adds each worker's --disaggregation-mode.
KV_TRANSFER_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
# AIConfigurator's own vLLM rules for a worker's per-step token budget (aiconfigurator/generator/rule_plugin/
# vllm.rule): a prefill step holds one prompt with room to spare; a decode step one token per sequence of the
# batch its generator allows (at least 512, else twice the modelled batch); an aggregated step both.
_PROMPT_ROOM = 1500
_GENERATOR_MIN_BATCH = 512


def batched_tokens(role: str, batch_size: int, isl: int) -> int:
    """--max-num-batched-tokens for a worker of `role` (worker, prefill, decode), as AIConfigurator writes it."""
    if role == "prefill":
        return isl + _PROMPT_ROOM
    allowed = _GENERATOR_MIN_BATCH if batch_size < _GENERATOR_MIN_BATCH else 2 * batch_size
    return allowed if role == "decode" else allowed + isl + _PROMPT_ROOM


def pool_engine_args(args: list[str], pool: Pool, role: str, isl: int, nodes: int = 1) -> list[str]:
    """`args` running one of AIConfigurator's pools: its parallelism (tensor, pipeline, data, expert), its batch
    size (vLLM's --max-num-seqs) and its token budget replace the recipe's."""
    par = pool.parallelism
    for flag, value in (("--tensor-parallel-size", par.tp), ("--pipeline-parallel-size", par.pp),
                        ("--data-parallel-size", par.dp), ("--max-num-seqs", pool.batch_size),
                        ("--max-num-batched-tokens", batched_tokens(role, pool.batch_size, isl))):
        args = ea.with_flag(args, flag, str(value))
    # Data-parallel ranks on each node of a worker spanning nodes; within one node vLLM counts them itself.
    local = par.dp // nodes if nodes > 1 and par.dp > 1 else None
    args = ea.with_flag(args, "--data-parallel-size-local", str(local) if local else None)
    # Experts split as the tool modelled them, whatever the recipe's command did.
    return ea.with_switch(args, "--enable-expert-parallel", par.moe_ep > 1)


def with_engine_args(plan: WorkloadPlan, chosen: CardPlan) -> WorkloadPlan:
    """The plan running the configuration AIConfigurator chose, naming where its arguments came from: one
    aggregated worker, or prefill and decode pools (`pd_cluster`) with their workers per replica."""
    conf = chosen.configuration
    assert conf is not None
    # The source already names the tool ("AIConfigurator 0.12.0, database …"): said once, in the page's brackets.
    source = str(chosen.source) if chosen.source else "AIConfigurator"
    plan = plan.model_copy(update={"sized_by": SizedBy.of(chosen)})
    if conf.mode == "disagg":
        return _disaggregated(plan, conf, chosen.target.isl, source)
    pool = conf.workers[0]
    args = pool_engine_args(plan.worker.args, pool, "worker", chosen.target.isl, plan.worker.nodes)
    return plan.model_copy(update={"worker": plan.worker.model_copy(update={"args": args}),
                                   "max_num_seqs": pool.batch_size, "max_num_seqs_source": source})


def plan_configuration(request: WorkloadRequest, chosen: CardPlan, artifact: ApprovedArtifact, catalog: Catalog, *,
                       image: str, namespace: str, hf_token_secret: str | None, workload_id: str | None = None,
                       replicas: int | None = None) -> WorkloadPlan:
    """The plan running a traffic target's chosen configuration: the recipe's command for its card and shape,
    checked like any plan (InvalidWorkload when the recipe or the fit check refuses it), with the tool's
    arguments on top. `replicas`: instead of the ones the target needed (an upgrade keeps a scaled count)."""
    asked = sized_by_target(request, chosen)
    if replicas is not None:
        asked = asked.model_copy(update={"replicas": replicas})
    plan = plan_workload(asked, artifact, catalog, image=image, namespace=namespace,
                         hf_token_secret=hf_token_secret, workload_id=workload_id)
    return _checked_ranks(with_engine_args(plan, chosen))


def replan_sized(current: WorkloadPlan, request: WorkloadRequest, artifact: ApprovedArtifact,
                 catalog: Catalog) -> WorkloadPlan:
    """`current` moved to another artifact (or variant, or features) with the same configuration it was sized
    by: the same card, mode, pools, parallelism and batch sizes, and its replicas. Raises InvalidWorkload,
    naming that configuration, when the new artifact's recipe or fit check cannot run it: an upgrade never
    changes the shape of a workload sized by a target behind its owner's back."""
    sized = current.sized_by
    assert sized is not None
    try:
        return plan_configuration(request, sized.card_plan(), artifact, catalog, image=current.image,
                                  namespace=current.namespace, hf_token_secret=current.hf_token_secret,
                                  workload_id=current.workload_id, replicas=current.replicas)
    except InvalidWorkload as exc:
        raise InvalidWorkload(f"{artifact.id} cannot run the configuration this workload was sized by ({sized}): "
                              f"{exc}", field=exc.field, details=exc.details) from None


def kept_shape_problem(current: WorkloadPlan, layout: str | None) -> str | None:
    """Why an upgrade cannot keep the shape of a workload sized from a traffic target, or None. Its layout is
    the configuration AIConfigurator chose; a plan sized before plans kept that configuration cannot say
    what to run again, and re-planning it from the recipe would drop the tool's batch size and pools."""
    if current.sized_by is not None:
        if layout is not None and layout != current.layout:
            return (f"this workload was sized by a traffic target and runs the configuration AIConfigurator chose "
                    f"({current.sized_by}, layout {current.layout}); an upgrade keeps it, so it cannot change the "
                    f"layout to {layout}: create a new workload for another layout")
        return None
    if current.max_num_seqs_source.startswith("AIConfigurator"):
        return ("this workload was sized by a traffic target before workloads kept the configuration "
                "AIConfigurator chose; upgrading it would drop that configuration (its batch size"
                f"{' and prefill and decode pools' if current.prefill else ''}): create a new workload from the "
                "target on the new artifact")
    return None


def _disaggregated(plan: WorkloadPlan, conf: Configuration, isl: int, source: str) -> WorkloadPlan:
    node = get_hardware(plan.hardware).gpus_per_node
    prefill, decode = conf.workers

    def pool(side: Pool, role: str) -> WorkerPool:
        nodes = -(-side.gpus_per_worker // node)
        args = pool_engine_args(plan.worker.args, side, role, isl, nodes)
        if ea.flag_value(args, ("--kv-transfer-config",)) is None:
            args = [*args, "--kv-transfer-config", KV_TRANSFER_CONFIG]
        return WorkerPool(args=args, gpus_per_node=side.gpus_per_worker // nodes, nodes=nodes,
                          workers_per_replica=side.workers, env=dict(plan.worker.env))
    gpus_per_node, nodes = replica_set_nodes(
        [side.gpus_per_worker for side in conf.workers for _ in range(side.workers)], node)
    fit = {**plan.fit, "sized_pool": "decode", "note": (
        f"the plane's fit check is for one decode worker ({decode.gpus_per_worker} GPUs); AIConfigurator sized "
        f"both pools ({conf.parallelism})")}
    return plan.model_copy(update={
        "layout": "pd_cluster", "worker": pool(decode, "decode"), "prefill": pool(prefill, "prefill"),
        "gpus_per_replica": sum(side.workers * side.gpus_per_worker for side in conf.workers),
        "max_num_seqs": decode.batch_size, "max_num_seqs_source": source, "fit": fit,
        "placement": plan.placement.model_copy(update={"gpus_per_node": gpus_per_node, "nodes_per_replica": nodes})})


def replica_set_nodes(workers: list[int], node: int) -> tuple[int, int]:
    """(GPUs per node, nodes) placement reserves for one replica whose workers use `workers` GPUs each, on
    nodes of `node` GPUs. Placement gives every node of a replica the same share, so the workers are packed
    onto as few nodes as hold them (largest first; a worker larger than a node takes whole nodes) and each
    node reserves the fullest node's GPUs: never less than a worker needs where it lands, and exactly the
    workers' GPUs when they fill one node or whole nodes."""
    whole = sum(gpus // node for gpus in workers if gpus >= node)
    free: list[int] = []
    for gpus in sorted((g for g in workers if g < node), reverse=True):
        room = next((i for i, left in enumerate(free) if left >= gpus), None)
        if room is None:
            free.append(node - gpus)
        else:
            free[room] -= gpus
    fullest = node if whole else max(node - left for left in free)
    return fullest, whole + len(free)

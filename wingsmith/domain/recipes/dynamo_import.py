"""Parse NVIDIA Dynamo recipes (every `recipes/**/*.yaml` that holds a DynamoGraphDeployment) into
catalog entries. Pure: the snapshot comes in as texts (problems.Snapshot), read by
wingsmith/adapters/recipes/files.py or fetched by wingsmith/adapters/recipes/refresh.py.

A manifest may hold several YAML documents (ConfigMaps, ComputeDomains) before or after the
DynamoGraphDeployment; both the v1alpha1 (`services` map, `envs`) and v1beta1 (`components` list,
`env`) shapes occur. Worker arguments may be an argv list or one shell script string, and may name
their values through the container's env (`--tensor-parallel-size "${TENSOR_PARALLEL_SIZE}"`).
Engines read settings from files too: TensorRT-LLM's `--extra-engine-args` and SGLang's `--config`,
usually mounted from a ConfigMap in the same manifest. Kustomize bases are full manifests; the
patches overlays apply are partial ones and are noted, not read as entries."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from wingsmith.domain.hardware import HARDWARE, NVIDIA_HARDWARE, hardware_for_product_label
from wingsmith.domain.recipes.dynamo_components import Component, argv, claimed_products, components, mapping, selected
from wingsmith.domain.recipes.dynamo_worker import ModelNames, read_worker
from wingsmith.domain.recipes.models import DynamoEntry, DynamoWorker
from wingsmith.domain.recipes.problems import BadField, ImportProblem, PartProblems, Snapshot, Unreadable, path_order
from wingsmith.domain.recipes.vllm_import import SAFE_LOADER

# The files of a snapshot the importer reads: every YAML under recipes/ (DGDs also live in
# deploy-16gpu.yaml, deploy_hopper_16gpu.yaml and kustomize bases, not only in deploy.yaml).
FILES = re.compile(r"recipes/.+\.yaml")
GLOBS = ("recipes/**/*.yaml",)  # the same files, for reading a directory
_BACKENDS = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "tensorrtllm": "trtllm", "tensorrt_llm": "trtllm"}
_FAMILY_KEY = "nvidia.com/gpu.family"  # GPU feature discovery's generation label (hopper, blackwell)
# Workload kinds that run a model server without Dynamo: such a manifest is reported, not skipped.
_PLAIN_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "LeaderWorkerSet")


# Cloud instance types upstream names its cluster variants by (`deploy-aws-p5.48xlarge.yaml`): their card.
_INSTANCE_CARDS = {"p5.48xlarge": "h100", "p5e.48xlarge": "h200", "p5en.48xlarge": "h200", "p6-b200.48xlarge": "b200"}


def _family_from_dirs(parts: tuple[str, ...]) -> str | None:
    """A GPU generation (`hopper`, `blackwell`) a directory or file name names, when it names no card."""
    families = {h.generation for h in NVIDIA_HARDWARE}
    for part in reversed(parts):
        hit = next((t for t in re.split(r"[-_.]", part.lower()) if t in families), None)
        if hit:
            return hit
    return None


def _card_from_dirs(parts: tuple[str, ...]) -> str | None:
    for part in reversed(parts):
        instance = next((card for name, card in _INSTANCE_CARDS.items() if name in part.lower()), None)
        if instance:
            return instance
    for part in reversed(parts):
        tokens = re.split(r"[-_.]", part.lower())
        hit = next((t for t in tokens if t in HARDWARE), None)
        if hit:
            return hit
    return None


@dataclass
class Manifest:
    """One manifest file: where it lives (its directories name the model, often the backend, sometimes
    the card) and, by kind, the documents its graphs read beside them."""
    rel: str
    config_maps: dict[str, dict[str, str]] = field(default_factory=dict)
    claim_templates: dict[str, dict] = field(default_factory=dict)
    graphs: list[dict] = field(default_factory=list)

    @property
    def path(self) -> PurePosixPath:
        return PurePosixPath(self.rel)

    @property
    def dirs(self) -> tuple[str, ...]:
        return self.path.relative_to("recipes").parts[:-1]

    @property
    def backend_dir(self) -> str | None:
        return next((p for p in self.dirs if p in _BACKENDS), None)

    @property
    def folder(self) -> str:
        """The model directory under recipes/ (all of it above the backend's directory)."""
        dirs, backend_dir = self.dirs, self.backend_dir
        return "/".join(dirs[:dirs.index(backend_dir)]) if backend_dir else (dirs[0] if dirs else self.path.stem)


# ---- the documents of a manifest, one handler per kind the graphs use ---------------------------------

def add_config_map(manifest: Manifest, doc: dict) -> None:
    """Engine config files (`--extra-engine-args`, `--config`) are mounted from these."""
    name = str((doc.get("metadata") or {}).get("name") or f"#{len(manifest.config_maps)}")
    manifest.config_maps[name] = {str(k): str(v) for k, v in (doc.get("data") or {}).items()}


def add_claim_template(manifest: Manifest, doc: dict) -> None:
    """DRA ResourceClaimTemplates: their device selectors may name the GPU product."""
    manifest.claim_templates[str(mapping(doc.get("metadata")).get("name"))] = doc


def add_graph(manifest: Manifest, doc: dict) -> None:
    manifest.graphs.append(doc)


_DOCUMENTS = {"ConfigMap": add_config_map, "ResourceClaimTemplate": add_claim_template,
              "DynamoGraphDeployment": add_graph}


def read_manifest(rel: str, docs: list[Any]) -> Manifest:
    manifest = Manifest(rel)
    for doc in docs:
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if isinstance(kind, str) and kind in _DOCUMENTS:
            _DOCUMENTS[kind](manifest, doc)
    return manifest


# ---- one graph ------------------------------------------------------------------------------------

def graph_backend(dgd: dict, manifest: Manifest) -> tuple[str | None, Any]:
    """The backend (`spec.backendFramework`, else the directory, else `python3 -m dynamo.<backend>`) and
    the name it was given."""
    framework = (dgd.get("spec") or {}).get("backendFramework") or manifest.backend_dir or _backend_from_commands(dgd)
    return (_BACKENDS.get(str(framework).lower()) if framework else None), framework


def graph_workers(dgd: dict, where: str) -> list[Component]:
    workers = [c for c in components(dgd) if c.role]
    if not workers:
        raise BadField(f"{where}spec.components", "no worker component")
    if len(workers) > 1:
        for comp in workers:
            if comp.role == "worker":
                comp.kind_role = comp.named_role()
    return workers


@dataclass
class Workers:
    """What a graph's workers state, together."""
    built: list[DynamoWorker] = field(default_factory=list)
    model_ids: list[str] = field(default_factory=list)
    source: str | None = None  # where the first model id was stated
    served: tuple[str, str] | None = None  # the first `--served-model-name` and where
    labels: list[str] = field(default_factory=list)  # card labels from node selectors
    claimed: list[str] = field(default_factory=list)  # GPU products from resource claims
    families: list[str] = field(default_factory=list)  # GPU generations from node selectors
    split: bool = False  # an engine serves one phase of disaggregated serving

    def add(self, worker: DynamoWorker, models: ModelNames, labels: list[str], claimed: list[str],
            families: list[str], split: bool) -> None:
        self.built.append(worker)
        self.model_ids += [n for n in models.names if n not in self.model_ids]
        self.source = self.source or models.source
        self.served = self.served or models.served
        self.labels += labels
        self.claimed += claimed
        self.families += families
        self.split = self.split or split


def read_workers(comps: list[Component], backend: str, manifest: Manifest, parts: PartProblems) -> Workers:
    out = Workers()
    for comp in comps:
        read = read_worker(comp, backend, manifest.config_maps, parts)
        products = claimed_products(comp, manifest.claim_templates)
        worker = read.worker
        if worker.card is None and products and (hw := hardware_for_product_label(products[0])):
            worker = worker.model_copy(update={"card": hw.id, "card_label": products[0]})
        out.add(worker, read.models, read.labels, products, [f.lower() for f in selected(comp.pod_spec, _FAMILY_KEY)],
                read.split)
    return out


def is_disaggregated(workers: Workers, manifest: Manifest) -> bool:
    # A lone "decode" worker is how v1beta1 graphs spell an aggregated one; a prefill pool or an
    # engine told --disaggregation-mode (beside an encoder on another card, say) is split serving.
    return (workers.split or any(w.role == "prefill" for w in workers.built)
            or any(p.startswith("disagg") for p in manifest.dirs) or manifest.path.stem.startswith("disagg"))


def serving_worker(built: list[DynamoWorker]) -> DynamoWorker:
    """The worker whose concurrency limits clients and whose figures the entry carries: decode in a
    disaggregated graph; never an encoder."""
    serving = [w for w in built if w.role != "encode"] or built
    return next((w for w in serving if w.role == "decode"), serving[0])


@dataclass(frozen=True)
class EntryCard:
    card: str | None
    label: str | None
    source: str | None
    family: str | None = None


def stated_card(main: DynamoWorker, workers: Workers) -> EntryCard:
    """The card the pods select: the serving worker's, else any worker's node label or claimed product."""
    if main.card_label is not None:
        by_claim = main.card_label in workers.claimed and main.card_label not in workers.labels
        return EntryCard(main.card, main.card_label, "resource claim" if by_claim else "node selector")
    if workers.labels or workers.claimed:
        label = (workers.labels or workers.claimed)[0]
        hw = hardware_for_product_label(label)
        return EntryCard(hw.id if hw else None, label, "node selector" if workers.labels else "resource claim")
    return EntryCard(main.card, None, None)


def entry_card(main: DynamoWorker, workers: Workers, manifest: Manifest) -> EntryCard:
    """The stated card, else the one the directory or file name names, else the GPU generation a node
    label or the name gives."""
    card = stated_card(main, workers)
    if card.label is None:
        named = _card_from_dirs((*manifest.dirs, manifest.path.stem))
        card = EntryCard(named, None, "directory name" if named else None)
    if card.card is not None:
        return card
    family = next(iter(workers.families), None) or _family_from_dirs((*manifest.dirs, manifest.path.stem))
    source = card.source
    if family is not None and source is None:
        source = "node selector" if workers.families else "directory name"
    return EntryCard(None, card.label, source, family)


def entry_name(workers: Workers, folder: str) -> tuple[str, str, str | None]:
    """The name clients ask for, where it was stated, and the checkpoint the workers load when it is
    another (often a quantised repo such as nvidia/Kimi-K2.6-NVFP4)."""
    served = workers.served
    loaded = next((m for m in workers.model_ids if not served or m != served[0]), None)
    if served:
        return served[0], served[1], loaded
    if workers.model_ids:
        return workers.model_ids[0], workers.source or "--model", loaded
    return folder, "recipe folder", loaded


def graph_entry(dgd: dict, where: str, manifest: Manifest, parts: PartProblems) -> DynamoEntry | None:
    """The entry of one graph, or None (noted) when its backend is unknown."""
    backend, framework = graph_backend(dgd, manifest)
    if backend is None:
        parts.note(f"{where}spec.backendFramework", f"unknown backend {framework!r} and none in the "
                   "directory name or worker command: graph skipped")
        return None
    workers = read_workers(graph_workers(dgd, where), backend, manifest, parts)
    disaggregated = is_disaggregated(workers, manifest)
    main = serving_worker(workers.built)
    card = entry_card(main, workers, manifest)
    name, name_source, loaded = entry_name(workers, manifest.folder)
    built = workers.built
    if not disaggregated:
        # Upstream labels the one worker of many aggregated graphs `decode`; it does both phases.
        built = [w.model_copy(update={"role": "aggregated"}) if w.role == "decode" else w for w in built]
    return DynamoEntry(
        source_path=manifest.rel, model=manifest.folder, model_ids=workers.model_ids, model_name=name,
        model_name_source=name_source, loaded_model=loaded,
        backend=backend, mode="disaggregated" if disaggregated else "aggregated",
        card=card.card, card_label=card.label, card_source=card.source, card_family=card.family,
        family_cards=[h.id for h in NVIDIA_HARDWARE if card.family and h.generation == card.family],
        gpus_per_worker=main.gpus,
        nodes=main.nodes, replicas=main.replicas, tensor_parallel_size=main.tensor_parallel_size,
        max_concurrency=main.max_concurrency, workers=built)


def parse_deploy(text: str, rel: str, parts: PartProblems | None = None,
                 docs: list[Any] | None = None) -> list[DynamoEntry]:
    """The entries of one manifest (`rel`: its path relative to the snapshot's root, `recipes/...`;
    `docs`: its documents, when the caller has parsed them already)."""
    parts = parts or PartProblems(rel)
    manifest = read_manifest(rel, _documents(text) if docs is None else docs)
    if not manifest.graphs:
        raise BadField("kind", "no DynamoGraphDeployment document in the file")
    many = len(manifest.graphs) > 1
    entries = [graph_entry(dgd, f"(document {i + 1})" if many else "", manifest, parts)
               for i, dgd in enumerate(manifest.graphs)]
    return [e for e in entries if e is not None]


def _documents(text: str) -> list[Any]:
    try:
        return [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BadField(f"line {mark.line + 1}" if mark else "(document)", "not valid YAML") from None


def _plain_workloads(text: str) -> list[str]:
    """`Kind/name` of each workload that runs pods itself (a Deployment and the like) in a manifest."""
    if not re.search(rf"^kind:\s*({'|'.join(_PLAIN_WORKLOADS)})\s*$", text, re.MULTILINE):
        return []
    try:
        docs = _documents(text)
    except BadField:
        return []
    return [f"{d['kind']}/{mapping(d.get('metadata')).get('name', '?')}" for d in docs
            if isinstance(d, dict) and d.get("kind") in _PLAIN_WORKLOADS]


def _backend_from_commands(dgd: dict) -> str | None:
    """`python3 -m dynamo.<backend>` in a worker's command, when nothing else names the backend."""
    try:
        comps = components(dgd)
    except BadField:
        return None
    for comp in comps:
        for token in argv(comp.container):
            if token.startswith("dynamo.") and token[7:] in _BACKENDS:
                return token[7:]
    return None


def _is_patch(dgd: dict) -> bool:
    """A kustomize patch: a DGD whose components carry no worker command or resources of their own."""
    try:
        comps = components(dgd)
    except BadField:
        return False  # not a graph at all: parse_deploy says why
    return not any(c.role and (c.container.get("args") or c.container.get("command") or c.gpus) for c in comps)


def import_dynamo(files: Snapshot) -> tuple[list[DynamoEntry], list[ImportProblem], int]:
    """Entries from every manifest under recipes/ that holds a DynamoGraphDeployment, the problems
    (files and parts), and how many such manifests were read."""
    entries: list[DynamoEntry] = []
    problems: list[ImportProblem] = []
    manifests = 0
    for rel in sorted((p for p in files if FILES.fullmatch(p)), key=path_order):
        text = files[rel]
        if isinstance(text, Unreadable):
            problems.append(ImportProblem(file=rel, field="(file)", reason=text.reason))
            continue
        if "DynamoGraphDeployment" not in text:
            if plain := _plain_workloads(text):
                # A model served without Dynamo (a `vllm serve` Deployment beside the graphs): said, not skipped.
                problems.append(ImportProblem(
                    file=rel, field="kind", reason=f"deploys plain {', '.join(plain)} (no DynamoGraphDeployment): "
                    "not a Dynamo recipe entry"))
            continue  # perf jobs, model caches, routes: not deployments
        parts = PartProblems(rel)
        try:
            docs = _documents(text)
            dgds = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DynamoGraphDeployment"]
            if not dgds:
                continue  # the name appears only in a comment or a script
            if all(_is_patch(d) for d in dgds):
                parts.note("spec", "a kustomize patch (no worker of its own): its base manifest is the entry",
                           scope="warning")
            else:
                manifests += 1
                entries.extend(parse_deploy(text, rel, parts, docs))
        except BadField as exc:
            problems.append(ImportProblem(file=rel, field=exc.field, reason=exc.reason))
        except (AttributeError, TypeError) as exc:
            # A field with the wrong shape somewhere deep in a manifest: still name the file.
            problems.append(ImportProblem(file=rel, field="(manifest)", reason=f"unexpected shape: {exc}"))
        problems.extend(parts.problems)
    return entries, problems, manifests

"""The adapter to NVIDIA's AIConfigurator (the optional `perf` extra): estimates and traffic plans.

AIConfigurator runs on CPU from a per-GPU database; one agg-vs-disagg search takes tens of seconds and
holds the GIL, so searches in one process run one at a time, and every answer is cached
(wingsmith/adapters/perf/cache.py). It is imported only when a search runs: the API and the other workers never
load it (nor pandas, pyarrow, matplotlib).

The tool is never allowed onto the network: a model it does not ship is given to it as a directory
holding the config.json the plane already resolved; without one, the entry says the model is not
supported.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import math
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from importlib import metadata
from pathlib import Path
from typing import Any

from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.perf.cache import CacheKey, EstimateCache
from wingsmith.adapters.perf.tool_yaml import parse_the_tools_yaml_in_c
from wingsmith.adapters.perf.turns import Turns
from wingsmith.domain.perf.cards import gpus_for_layout, no_system_reason, system_for
from wingsmith.domain.perf.estimates import (
    MODES,
    NOT_INSTALLED,
    Configuration,
    Estimate,
    EstimateRequest,
    FrontierPoint,
    Mode,
    Parallelism,
    PerformanceEntry,
    Pool,
    Source,
    thin_frontier,
    unsupported_entries,
)
from wingsmith.domain.perf.traffic import CardPlan, TrafficTarget, plan_card

TOOL = "AIConfigurator"
DISTRIBUTION = "aiconfigurator"
# The tool keeps process-wide caches and is CPU-bound under the GIL: one search at a time per process, traffic
# plans before drafts' estimates, each in the order asked (wingsmith/adapters/perf/turns.py).
_SEARCHES = Turns()
log = get_logger("wingsmith.perf")
_REASON_LIMIT = 300
# Failures of the machine rather than of the question: they propagate (the activity retries) and are not cached.
_MACHINE_TROUBLE = (MemoryError, OSError)
# A first token later than this is no serving at all: the bound of a search for how close a card comes.
_ANY_TTFT_MS = 600_000.0


class PerfNotInstalled(RuntimeError):
    def __init__(self) -> None:
        super().__init__(NOT_INSTALLED)


class SearchNoLongerWanted(RuntimeError):
    """The caller stopped waiting (its draft's workflow ended) before this search's turn came."""


class _ExperimentErrors(logging.Filter):
    """Why each mode found nothing, as the tool logs it: its `cli_default` raises one generic "no feasible
    configurations" and drops the per-mode cause (e.g. no DeepEP data for cross-node EP on GB200).

    The tool logs those causes at ERROR, though they are the answer it was asked for ("no estimate for this
    card", its own `is_expected_cli_error`), and the plane keeps them as the rows' reasons: they are taken
    off the ERROR stream while a search runs and said once by the plane at INFO (`Estimator._search`). A
    defect in the tool, logged with its traceback, stays an ERROR."""

    EXPERIMENT_FAILED = "Error running experiment %s: %s"
    SUMMARY = ("  -> Experiment %s failed: %s", "No successful experiment runs to compare")

    def __init__(self) -> None:
        super().__init__()
        self.by_mode: dict[str, str] = {}
        self.logger = logging.getLogger("aiconfigurator.cli.main")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            return True
        if record.msg == self.EXPERIMENT_FAILED and isinstance(record.args, tuple) and len(record.args) == 2:
            self.by_mode[str(record.args[0])] = str(record.args[1])
            return False
        return not (isinstance(record.msg, str) and record.msg.startswith(self.SUMMARY))

    def __enter__(self) -> _ExperimentErrors:
        self.logger.addFilter(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.logger.removeFilter(self)


def installed() -> bool:
    return importlib.util.find_spec(DISTRIBUTION) is not None


def tool_version() -> str:
    if not installed():
        raise PerfNotInstalled()
    return metadata.version(DISTRIBUTION)


@functools.cache
def _prepare() -> None:
    """Once per process, before the tool is first asked anything."""
    # Its INFO/WARNING lines (per-table fallbacks, a deprecation banner) would flood the worker's log.
    logging.getLogger("aiconfigurator").setLevel(logging.ERROR)
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="aiconfigurator.*")
    parse_the_tools_yaml_in_c()


def database_version(system: str, backend: str) -> str | None:
    """The version of the tool's database it queries by default for this card and backend."""
    _prepare()
    from aiconfigurator.sdk.perf_database import get_latest_database_version, get_version_slots
    slots = get_version_slots(system, backend) or {}
    return slots.get("current") or get_latest_database_version(system, backend)


def _reason(err: BaseException | str) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 1] + "…"


def _int(row: dict, name: str, default: int = 1) -> int:
    value = row.get(name)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return default
    return int(value)


def _parallelism(row: dict, prefix: str = "") -> Parallelism:
    return Parallelism(tp=_int(row, f"{prefix}tp"), pp=_int(row, f"{prefix}pp"), dp=_int(row, f"{prefix}dp"),
                       moe_tp=_int(row, f"{prefix}moe_tp"), moe_ep=_int(row, f"{prefix}moe_ep"))


def configuration_from_row(mode: Mode, row: dict, gpu_budget: int | None) -> Configuration:
    """One of the tool's result rows (per replica) in the plane's words, scaled to the replicas the GPU
    budget holds (as `aiconfigurator cli default` reports it); `gpu_budget=None` keeps one replica."""
    per_replica = _int(row, "num_total_gpus")
    replicas = max(1, gpu_budget // per_replica) if gpu_budget else 1
    if mode == "agg":
        parallel = _parallelism(row)
        workers = [Pool(workers=1, gpus_per_worker=parallel.gpus, parallelism=parallel, batch_size=_int(row, "bs"))]
        words = str(parallel)
    else:
        workers = []
        for side in ("p", "d"):
            parallel = _parallelism(row, f"({side})")
            workers.append(Pool(workers=_int(row, f"({side})workers"), gpus_per_worker=parallel.gpus,
                                parallelism=parallel, batch_size=_int(row, f"({side})bs")))
        words = (f"prefill {workers[0].workers} × {workers[0].parallelism}, "
                 f"decode {workers[1].workers} × {workers[1].parallelism}")
    return Configuration(
        mode=mode, tokens_per_second_per_gpu=float(row["tokens/s/gpu"]),
        tokens_per_second_per_user=float(row["tokens/s/user"]), ttft_ms=float(row["ttft"]),
        tpot_ms=float(row["tpot"]), concurrency=_int(row, "concurrency") * replicas, gpus=per_replica * replicas,
        replicas=replicas, gpus_per_replica=per_replica,
        requests_per_second_per_replica=float(row["request_rate"]), parallelism=words, workers=workers)


def _rows(frame: Any) -> list[dict]:
    if frame is None or len(frame) == 0:
        return []
    return [dict(r) for r in frame.to_dict(orient="records")]


def _latency(row: dict, name: str) -> float | None:
    value = row.get(name)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def frontier_of(frame: Any) -> list[FrontierPoint]:
    """The tool's pareto frontier (its rows keep every column, so each point keeps its TTFT and TPOT)."""
    return thin_frontier([FrontierPoint(tokens_per_second_per_user=float(r["tokens/s/user"]),
                                        tokens_per_second_per_gpu=float(r["tokens/s/gpu"]),
                                        ttft_ms=_latency(r, "ttft"), tpot_ms=_latency(r, "tpot"))
                          for r in _rows(frame)])


class Estimator:
    """Estimates and traffic plans, cached under `home`/perf-cache."""

    def __init__(self, home: Path) -> None:
        self.root = Path(home) / "perf-cache"
        self.cache = EstimateCache(self.root / "answers")
        # Searches this estimator ran (cached answers not counted): each is logged as "perf search".
        self.searches = 0

    def _searched(self, kind: str, request: EstimateRequest, started: float) -> None:
        self.searches += 1
        log.info("perf search", kind=kind, model=request.model, card=request.card,
                 layout=request.layout if kind == "estimate" else None, seconds=round(time.perf_counter() - started, 3))

    # -- what the tool is asked about ------------------------------------------------------------
    def _source(self, card: str, backend: str) -> tuple[str | None, Source | None, str | None]:
        """The tool's system for the card and the database the figures would come from, or why none."""
        if not installed():
            raise PerfNotInstalled()
        system = system_for(card)
        if system is None:
            return None, None, no_system_reason(card, TOOL)
        _prepare()
        version = tool_version()
        db_version = database_version(system, backend)
        if db_version is None:
            return None, None, f"{TOOL} {version} has no {backend} database for {system}"
        return system, Source(version=version, database=f"{system} {backend} {db_version}"), None

    @staticmethod
    def _key(kind: str, request: EstimateRequest, source: Source, *, layout: str, gpus: int,
             requests_per_second: float | None = None) -> CacheKey:
        return CacheKey(kind=kind, model=request.model, model_commit=request.model_commit,
                        config_digest=request.config_digest(), card=request.card, layout=layout,
                        backend=request.backend, isl=request.isl, osl=request.osl, ttft_ms=request.ttft_ms,
                        tpot_ms=request.tpot_ms, gpus=gpus, requests_per_second=requests_per_second,
                        tool_version=source.version, database_version=source.database)

    def _unsupported(self, request: EstimateRequest, system: str, source: Source) -> tuple[str | None,
                                                                                             dict[Mode, bool]]:
        """Why the tool cannot be asked about this model on this card (None when it can), and the modes
        its support matrix passes. Called during a search's turn: the check loads the tool's tables."""
        model_path = self._model_path(request.model, request.config, request.config_digest())
        if model_path is None:
            return (f"{TOOL} {source.version} does not ship {request.model} and no config.json was given "
                    "for it"), {}
        supported = self._support(model_path, system, request.backend)
        if not any(supported.values()):
            return f"{TOOL} {source.version} does not support {request.model} on {system} with {request.backend}", {}
        return None, supported

    def _model_path(self, model: str, config: dict | None, digest: str | None) -> str | None:
        from aiconfigurator.sdk.common import DefaultHFModels
        if model in DefaultHFModels:
            return model
        if config is None or digest is None:
            return None
        # A directory the tool reads config.json from (its only way to take a model it does not ship).
        folder = self.root / "models" / digest
        if not (folder / "config.json").exists():
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / ".config.json.tmp"
            tmp.write_text(json.dumps(config))
            tmp.replace(folder / "config.json")
        return str(folder)

    def _support(self, model_path: str, system: str, backend: str) -> dict[Mode, bool]:
        from aiconfigurator.cli.api import cli_support
        found = cli_support(model_path, system, backend=backend)
        agg, disagg = (found.agg_supported, found.disagg_supported) if hasattr(found, "agg_supported") else found
        return {"agg": bool(agg), "disagg": bool(disagg)}

    # -- an estimate for a draft -----------------------------------------------------------------
    def estimate(self, request: EstimateRequest, wanted: Callable[[], bool] | None = None) -> Estimate:
        """`wanted` is asked when the search's turn comes (searches take turns): False skips it
        (SearchNoLongerWanted), so a queue of asks whose drafts went away costs no CPU."""
        system, source, why_not = self._source(request.card, request.backend)
        if system is None or source is None:
            return Estimate(request=request, entries=unsupported_entries(request, why_not or ""))
        gpus = request.gpus or gpus_for_layout(request.layout, request.card)
        key = self._key("estimate", request, source, layout=request.layout, gpus=gpus)
        cached = self.cache.get(key, Estimate)
        if cached is not None:
            return cached.model_copy(update={"cached": True, "seconds": 0.0})
        with _SEARCHES.turn():
            # The same question may have been searched while this one waited its turn: one search, not two.
            cached = self.cache.get(key, Estimate)
            if cached is not None:
                return cached.model_copy(update={"cached": True, "seconds": 0.0})
            if wanted is not None and not wanted():
                raise SearchNoLongerWanted(f"{request.model} on {request.card} {request.layout}")
            started = time.perf_counter()
            entries = self._search(request, system, gpus, source)
            self._searched("estimate", request, started)
            estimate = Estimate(request=request, entries=entries, seconds=round(time.perf_counter() - started, 3))
            self.cache.put(key, estimate)
        return estimate

    def _search(self, request: EstimateRequest, system: str, gpus: int, source: Source) -> list[PerformanceEntry]:
        """One search (the caller holds the turn)."""
        with _ExperimentErrors() as logged:
            from aiconfigurator.cli.api import cli_default
            from aiconfigurator.sdk.errors import NoFeasibleConfigError
            ttft, tpot = request.latency_targets
            try:
                why_not, supported = self._unsupported(request, system, source)
                if why_not is not None:
                    return unsupported_entries(request, why_not, source)
                model_path = self._model_path(request.model, request.config, request.config_digest())
                result = cli_default(model_path, gpus, system, backend=request.backend, isl=request.isl,
                                     osl=request.osl, ttft=ttft, tpot=tpot, top_n=1)
                best, fronts = result.best_configs, result.pareto_fronts
                errors: dict[str, BaseException | str] = {
                    name: outcome.error for name, outcome in result.outcomes.items() if outcome.error}
            except NoFeasibleConfigError as err:
                best, fronts = {}, {}
                errors = {mode: logged.by_mode.get(mode) or err for mode in MODES}
            except _MACHINE_TROUBLE:
                raise  # this worker's trouble, not the question's: retried, and never cached
            except Exception as err:  # the tool's own refusal (a model or shape it cannot model): in words
                return unsupported_entries(request, f"{TOOL} could not estimate it: {_reason(err)}", source)
        entries = []
        for mode in MODES:
            rows = _rows(best.get(mode))
            base = {"card": request.card, "layout": request.layout, "mode": mode, "backend": request.backend,
                    "isl": request.isl, "osl": request.osl, "source": source}
            if not supported[mode]:
                reason = f"{TOOL} {source.version} does not support {mode} serving of {request.model} on {system}"
            elif rows:
                entries.append(PerformanceEntry(**base, configuration=configuration_from_row(mode, rows[0], gpus),
                                                frontier=frontier_of(fronts.get(mode))))
                continue
            elif mode in errors:
                reason = f"no {mode} configuration within {gpus} GPUs: {_reason(errors[mode])}"
                # An answer, not a fault: the draft's row says it; the log notes it (the tool said it at ERROR).
                log.info("perf search found no configuration", model=request.model, card=request.card,
                         layout=request.layout, mode=mode, reason=reason)
            else:
                # The tool returns nothing without saying which of its three causes it was: all three, in words.
                reason = (f"no {mode} configuration within {gpus} GPUs meets TTFT ≤ {ttft:g} ms and "
                          f"TPOT ≤ {tpot:g} ms (or none fits in {gpus} GPUs, or the database has no data for it)")
            entries.append(PerformanceEntry(**base, reason=reason))
        return entries

    # -- a traffic target ------------------------------------------------------------------------
    @staticmethod
    def plan_in_flight() -> AbstractContextManager[None]:
        """Around all of one plan's cards: no draft's estimate starts in between (wingsmith/adapters/perf/turns.py)."""
        return _SEARCHES.plan_in_flight()

    def plan_for_target(self, *, model: str, card: str, target: TrafficTarget, model_commit: str | None = None,
                        config: dict | None = None, backend: str = "vllm") -> CardPlan:
        """The smallest configuration on `card` meeting the target's TTFT and TPOT, and its replicas for
        the rate (the tool's `recommend` search, checked against the targets here)."""
        system, source, why_not = self._source(card, backend)
        if system is None or source is None:
            return CardPlan(card=card, target=target, why_not=why_not)
        request = EstimateRequest(model=model, model_commit=model_commit, config=config, card=card, backend=backend,
                                  isl=target.isl, osl=target.osl, ttft_ms=target.ttft_ms, tpot_ms=target.tpot_ms)
        key = self._key("target", request, source, layout="", gpus=0, requests_per_second=target.requests_per_second)
        cached = self.cache.get(key, CardPlan)
        if cached is not None:
            return cached
        with _SEARCHES.turn(someone_waits=True):  # a person's dry run or create waits on it
            # An identical plan searched while this one waited its turn (two plans sharing a card, or the same
            # plan asked twice at once) answers from the cache: one search, not two.
            cached = self.cache.get(key, CardPlan)
            if cached is not None:
                return cached
            started = time.perf_counter()
            plan = self._recommend(request, system, target, source)
            self._searched("target", request, started)
            self.cache.put(key, plan)
        return plan

    def _recommend(self, request: EstimateRequest, system: str, target: TrafficTarget, source: Source) -> CardPlan:
        """One search (the caller holds the turn)."""
        from aiconfigurator.cli.api import cli_recommend
        from aiconfigurator.sdk.errors import NoFeasibleConfigError
        try:
            why_not, supported = self._unsupported(request, system, source)
            if why_not is not None:
                return CardPlan(card=request.card, target=target, source=source, why_not=why_not)
            model_path = self._model_path(request.model, request.config, request.config_digest())
            result = cli_recommend(model_path, system, target_request_rate=target.requests_per_second,
                                   backend=request.backend, isl=target.isl, osl=target.osl,
                                   ttft=target.ttft_ms, tpot=target.tpot_ms, top_n=5)
            best = result.best_configs
        except NoFeasibleConfigError as err:
            return self._closest(request, system, target, source,
                                 f"no configuration on {system} meets the target: {_reason(err)}")
        except _MACHINE_TROUBLE:
            raise
        except Exception as err:
            return CardPlan(card=request.card, target=target, source=source,
                            why_not=f"{TOOL} could not plan it: {_reason(err)}")
        candidates = [configuration_from_row(mode, row, None)
                      for mode in MODES if supported[mode] for row in _rows(best.get(mode))]
        if not candidates:
            return self._closest(request, system, target, source, f"no configuration on {system} meets the target")
        return plan_card(request.card, target, candidates, source)

    def _closest(self, request: EstimateRequest, system: str, target: TrafficTarget, source: Source,
                 why: str) -> CardPlan:
        """What the card reaches when `recommend` finds nothing within the targets: it answers nothing at all
        then, not even how close it came. The default search reports its best configuration even past the
        TPOT target, but keeps only configurations within the TTFT target; so it is asked with the TPOT target
        and no TTFT bound to speak of, within one node, then two (the budgets of the single- and the multi-node
        layouts), and the plan carries the best found with by how much it misses (issue 52). Its
        configurations are per replica, as recommend's are. The caller holds the turn."""
        reasons = []
        for layout in ("single_node_tp", "multi_node_tp"):
            gpus = gpus_for_layout(layout, request.card)
            asked = request.model_copy(update={"layout": layout, "gpus": gpus, "ttft_ms": _ANY_TTFT_MS})
            entries = self._search(asked, system, gpus, source)
            found = [_one_replica(e.configuration) for e in entries if e.configuration is not None]
            if found:
                return plan_card(request.card, target, found, source)
            reasons += [e.reason for e in entries if e.reason and e.reason not in reasons]
        return CardPlan(card=request.card, target=target, source=source,
                        why_not=f"{why}; nothing reachable within {gpus} GPUs either: {'; '.join(reasons)}")


def _one_replica(conf: Configuration) -> Configuration:
    """A default search's configuration (every replica its GPU budget holds) as one replica."""
    return conf.model_copy(update={"replicas": 1, "gpus": conf.gpus_per_replica,
                                   "concurrency": max(1, conf.concurrency // conf.replicas)})

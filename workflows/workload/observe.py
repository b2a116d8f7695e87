"""Observing a serving workload's clusters: one observation per cluster always in flight
(activities/observe.py), reading its DGD every `watch.status_seconds` and its frontend every
`watch.probe_seconds`, answering on news or after `watch.report_seconds`. What an answer says is
news, acted on under the lock by the healer (workflows/workload/heal.py); news seen before a change
under the lock is dropped and asked again. A cluster that does not answer for `watch.silence_seconds`
counts as unreachable: nothing can be known of it, and serving must not be claimed over it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.exceptions import TimeoutError as TemporalTimeout

from contracts import conditions as reason
from contracts.workload import ACTIVITY_OBSERVE, ClusterTarget, ObserveDeploymentInput, last_heard
from wingsmith.domain.config import observe_task_queue
from wingsmith.domain.dynamo import dgd_name
from wingsmith.domain.reconcile import Observation
from workflows import policies
from workflows.workload.cluster_ops import ClusterOps
from workflows.workload.heal import Healer
from workflows.workload.state import Workload


class Observer:
    def __init__(self, workload: Workload, ops: ClusterOps, healer: Healer) -> None:
        self.workload, self.ops, self.healer = workload, ops, healer
        # Per cluster: its observation in flight, what a finished one saw (None: no answer) with the lock's
        # change count at its start, the news key last acted on (and when the read it came from started),
        # when the cluster last answered, and the timer running since its observations stopped answering.
        self.looking: dict[str, asyncio.Task[None]] = {}
        self.news: dict[str, tuple[int, Observation | None]] = {}
        self.known: dict[str, tuple[str, datetime]] = {}
        self.heard: dict[str, datetime] = {}
        self.silence: dict[str, asyncio.Task[None]] = {}
        self.unregistered: set[str] = set()
        self.answers = 0  # answered observations this run
        self.targets: dict[str, ClusterTarget] | None = None  # read once per run; again when a cluster is not in it

    def to_look_at(self) -> list[str]:
        holding = self.workload.holding()
        return [*holding, *(n for n in self.workload.state.leftovers if n not in holding)]

    def missing(self) -> bool:
        """A cluster to hear from has no observation in flight nor news waiting. Clusters not registered
        cannot be observed."""
        wanted = {n for n in self.to_look_at() if n not in self.unregistered}
        return bool(wanted - set(self.looking) - set(self.news))

    async def start(self) -> None:
        # An observation in flight is never cancelled: cancelling races its answer (a command for an
        # activity that just completed fails the workflow task). One that a change under the lock made
        # stale (a scale, a heal, an upgrade's step) answers on the change it observes, or after its report
        # period; its news is dropped then and the next one answers at once. One for a cluster no
        # longer held is not acted on.
        wl = self.workload
        names = self.to_look_at()
        fresh = [n for n in names if n not in self.looking and n not in self.news and n not in self.unregistered]
        if not fresh:
            return
        targets = await self._targets(fresh)
        holding = wl.holding()
        for name in fresh:
            if name not in targets:
                self.unregistered.add(name)
                wl.event(reason.CLUSTER_UNREGISTERED, f"{name} is no longer registered: it cannot be watched",
                         cluster=name)
            elif name not in self.looking:
                _track(self.looking, name, self._look(targets[name], serving=name in holding,
                                                      changes=wl.lock.changes))

    async def end(self) -> None:
        """Before the run ends or continues as new. Observations in flight are left, not cancelled (see
        `start`): an observation's heartbeat finds its run closed, and it ends there."""
        for task in self.silence.values():
            task.cancel()
        self.healer.stop_placing_timer()
        await workflow.wait_condition(lambda: not self.silence)
        self.news.clear()

    async def act_on_news(self) -> None:
        wl, healer = self.workload, self.healer
        async with wl.lock:
            changed = (wl.state.heals, wl.state.placement_revision)
            news, self.news = self.news, {}
            for name, (changes, seen) in sorted(news.items()):
                if wl.deleting:
                    return
                if changes != wl.lock.changes:
                    self.known.pop(name, None)  # seen before a change: observe again, and answer at once
                    continue
                if seen is None:
                    self._start_silence(name)  # no answer; the next observation asks again
                    continue
                self.answers += 1
                self.known[name] = (seen.news_key(), seen.at)
                target = (self.targets or {}).get(name)
                if target is None:
                    continue
                if name in wl.holding():
                    heals = wl.state.heals
                    await healer.act_on(target, seen)
                    if wl.state.heals != heals:
                        # Healed: what was known of it is from before. The next look answers from a read
                        # started after the heal; one shared with other looks may have started before its
                        # apply, still show the fault, and heal it a second time.
                        self.known.pop(name, None)
                elif name in wl.state.leftovers:
                    await healer.remove_leftover(target, seen)
            await healer.place_if_short()
            await healer.show_observed()
            # Only a heal or a placement changes clusters: hearing that all is well leaves other
            # clusters' observations in flight current.
            wl.lock.quiet = changed == (wl.state.heals, wl.state.placement_revision)

    async def _targets(self, names: list[str]) -> dict[str, ClusterTarget]:
        """Registered clusters, read once per run (and again when one is not known yet): observing stays cheap."""
        if self.targets is None or not set(names) <= set(self.targets):
            self.targets = await self.ops.targets()
        return self.targets

    async def _look(self, target: ClusterTarget, *, serving: bool, changes: int) -> None:
        """One observation of one cluster, without the lock, so a scale never waits for it; what it saw is
        news for `act_on_news`, which drops it if a change under the lock made it stale."""
        seen = await self._observe(target, serving=serving)
        if seen is None:  # one that failed at once must not be asked again at once, forever
            await workflow.sleep(timedelta(seconds=self.workload.params.watch.status_seconds))
        self.news[target.info.name] = (changes, seen)

    async def _observe(self, target: ClusterTarget, *, serving: bool) -> Observation | None:
        """Waits for news of the cluster (activities/observe.py). None: no answer, because no attempt
        answered in time (no observe worker, a hung API) or it failed; its last heartbeat says when
        the cluster was last read, which still counts as hearing from it."""
        wl = self.workload
        name, watch, plan = target.info.name, wl.params.watch, wl.plan
        state = wl.state.clusters.get(name)
        # A cluster with a problem answers every status period, so its grace is counted; one that serves
        # as applied (or a leftover that still does not answer) only on news.
        settled = state is None or state.unhealthy_since is None
        report = watch.report_seconds if settled else watch.status_seconds
        known, known_at = self.known.get(name, (None, None))
        try:
            seen = await workflow.execute_activity(
                ACTIVITY_OBSERVE, ObserveDeploymentInput(
                    cluster=name, kubeconfig=target.kubeconfig, namespace=plan.namespace,
                    name=(state and state.dgd_name) or dgd_name(plan.workload_id, name, plan.revision),
                    served_model_name=plan.served_model_name if serving else None, known=known, known_at=known_at,
                    status_seconds=watch.status_seconds, probe_seconds=watch.probe_seconds, report_seconds=report),
                result_type=Observation,
                **policies.observe(observe_task_queue(wl.params.kube_task_queue), report, watch.silence_seconds))
        except ActivityError as err:
            heard = last_heard(err.cause.last_heartbeat_details if isinstance(err.cause, TemporalTimeout) else None)
            if heard is not None:
                self.heard[name] = max(heard, self.heard.get(name, heard))
            return None
        self.heard[name] = max(seen.at, self.heard.get(name, seen.at))
        if name in self.silence:
            self.silence[name].cancel()
        return seen

    def _start_silence(self, name: str) -> None:
        """Observations without an answer are skipped, unless none came for `watch.silence_seconds`: then
        the cluster counts as unreachable (and its grace starts). A timer decides, not a comparison with
        the clock, so the decision replays exactly."""
        if name not in self.silence:
            since = self.heard.setdefault(name, workflow.now())
            _track(self.silence, name, self._silent_after(name, since))

    async def _silent_after(self, name: str, since: datetime) -> None:
        limit = timedelta(seconds=self.workload.params.watch.silence_seconds)
        await workflow.sleep(max(since + limit - workflow.now(), timedelta(seconds=0.1)))
        del self.silence[name]
        if self.heard[name] > since:  # a lost observation read the cluster meanwhile: count from then
            self._start_silence(name)
            return
        at = since + limit
        self.news[name] = (self.workload.lock.changes, Observation(
            cluster=name, at=at, reachable=False,
            error=f"no answer to the plane's looks since {since.isoformat(timespec='seconds')} (its API hangs, "
                  "or the plane's watch worker is gone)"))


def _track(tasks: dict[str, asyncio.Task[None]], name: str, work: Coroutine[Any, Any, None]) -> None:
    """Run `work` as `tasks[name]` until it ends, however it ends (a task cancelled before it started
    never runs its own `finally`)."""
    task = tasks[name] = asyncio.create_task(work)
    task.add_done_callback(lambda done: tasks.pop(name) if tasks.get(name) is done else None)

"""Temporal activity: a workload's observation of its deployment on one cluster, waiting for news.

A serving workload hears from each of its clusters through one observation at a time. It reads the
DGD (metadata and status) every `status_seconds` and, when asked, probes its frontend's
`/v1/models` every `probe_seconds`, and answers with an `Observation` for
`wingsmith.reconcile.judge` only when there is news: what `judge` can tell apart
(`Observation.news_key`) differs from what the workflow last acted on (`known`), or
`report_seconds` passed. A workload whose clusters serve as applied so costs its workflow one
activity every `report_seconds`, not one per status period, and a change is still seen within one.

Reads are shared: every observation of the process on the same cluster and namespace takes its answer from
one LIST per status period (`SharedReads`), and probes go through one HTTP client, so a worker
watches thousands of deployments with a few requests a second. Observations keep time by the reads,
not by themselves: each waits for the read that starts one status period after the one it judged
(or takes a newer one another observation asked for), so all of a cluster's observations judge
every read, and a change is seen within one status period of happening. A deployment whose object
(uid, resourceVersion) and frontend answer did not change since the last read is not judged again.

It changes nothing, so any number of retries or duplicate runs are harmless. A cluster that cannot
be read is an answer, not a failure: the observation says unreachable and why, and the workflow's
grace decides what that means. While it waits the observation heartbeats with the time of its last
read, so a workflow whose observation died with its worker knows when the cluster was last heard from.
It heartbeats a third of its heartbeat timeout apart (the SDK sends at most one per 0.8 of it): the
heartbeats of thousands of waiting observations were most of the Temporal server's work (bench/watching.py).

Async (it mostly waits): it runs on the observe task queue (`wingsmith.config.observe_task_queue`),
whose worker holds thousands of them at once; the blocking LIST runs in a thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from contracts.workload import ACTIVITY_OBSERVE, ObserveDeploymentInput
from contracts.workload import last_heard as last_heard  # the workflow reads the heartbeat it writes
from wingsmith.kube import DgdClient, KubeconfigRef, KubeError, shared_api_client
from wingsmith.kube.dgd import frontend_url_of
from wingsmith.reconcile import FrontendCheck, Observation, read_observation

# An observation is cheap and repeated: a few quick attempts (one flaky 500 is not a partition); a cluster
# whose API refuses or fails them all is unreachable *this time*. Each call gets 3 s to connect and
# 5 s to answer, so a hung API is an unreachable answer within seconds, not a hung observation.
_ATTEMPTS = 5
_REQUEST_TIMEOUT = (3.0, 5.0)
# Without a heartbeat timeout (a test's environment), this often.
HEARTBEAT_SECONDS = 2.0


Reader = Callable[[KubeconfigRef, str], dict[str, dict[str, Any]]]
# One deployment by name: its object, or None when there is none.
OneReader = Callable[[KubeconfigRef, str, str], dict[str, Any] | None]

# At most this many looks of one cluster read their own deployment at once; past that, looks asked to
# answer at once share a fresh LIST instead (a plane restarting starts thousands of looks together).
_OWN_READS_AT_ONCE = 8


def _list_dgds(ref: KubeconfigRef, namespace: str) -> dict[str, dict[str, Any]]:
    # The process's client for this kubeconfig, as rollouts use it (blocking: called in a thread).
    with DgdClient(shared_api_client(ref), owns_api=False, attempts=_ATTEMPTS,
                   request_timeout=_REQUEST_TIMEOUT) as kube:
        return kube.by_name(namespace)


def _get_dgd(ref: KubeconfigRef, namespace: str, name: str) -> dict[str, Any] | None:
    with DgdClient(shared_api_client(ref), owns_api=False, attempts=_ATTEMPTS,
                   request_timeout=_REQUEST_TIMEOUT) as kube:
        return kube.get(name, namespace)


class SharedReads:
    """The DGDs of one cluster and namespace as last read, shared by every observation of the process:
    an observation that wants them no older than `max_age` gets the last read, waits for the one in flight, or
    starts one. One LIST per cluster per status period, however many deployments are observed.

    A look asked to answer at once (a new deployment, or just changed) reads its own deployment with one
    GET instead (`fresh`): a LIST started after it would cost as much as the namespace is large, and
    workloads placed one after another made one such LIST each."""

    def __init__(self, read: Reader = _list_dgds, read_one: OneReader | None = None):
        self._read = read
        # A custom LIST (tests) without its own GET reads one deployment out of the LIST.
        self._read_one: OneReader = read_one or (_get_dgd if read is _list_dgds
                                                 else lambda ref, namespace, name: read(ref, namespace).get(name))
        self._own_reads: dict[tuple[KubeconfigRef, str], int] = {}
        self._last: dict[tuple[KubeconfigRef, str], tuple[float, datetime, dict[str, dict[str, Any]] | KubeError]] = {}
        self._inflight: dict[tuple[KubeconfigRef, str], asyncio.Future[None]] = {}

    async def get(self, ref: KubeconfigRef, namespace: str, max_age: float, not_before: float = float("-inf")
                  ) -> tuple[datetime, dict[str, dict[str, Any]] | KubeError]:
        """A read started less than `max_age` ago, and not before `not_before` (monotonic): an observation
        asked for what is there now, after a change the plane just made, must not get an older read."""
        _, at, result = await self.read(ref, namespace, max_age, not_before)
        return at, result

    async def read(self, ref: KubeconfigRef, namespace: str, max_age: float, not_before: float = float("-inf")
                   ) -> tuple[float, datetime, dict[str, dict[str, Any]] | KubeError]:
        """As `get`, with when the read started (monotonic), which sets when the next one is due."""
        key = (ref, namespace)
        while True:
            last = self._last.get(key)
            if last is not None and last[0] >= not_before and time.monotonic() - last[0] < max_age:
                return last
            running = self._inflight.get(key)
            if running is not None:
                await asyncio.shield(running)
                last = self._last.get(key)
                if last is not None and last[0] >= not_before:
                    return last
                continue
            done = self._inflight[key] = asyncio.get_running_loop().create_future()
            try:
                started, at = time.monotonic(), datetime.now(UTC)
                try:
                    result: dict[str, dict[str, Any]] | KubeError = await asyncio.to_thread(self._read, ref, namespace)
                except KubeError as err:
                    result = err
                self._last[key] = (started, at, result)
                return started, at, result
            finally:
                del self._inflight[key]
                done.set_result(None)

    async def fresh(self, ref: KubeconfigRef, namespace: str, name: str
                    ) -> tuple[float, datetime, dict[str, dict[str, Any]] | KubeError]:
        """A read started now that holds deployment `name` if it exists: its own GET, or a fresh shared
        LIST when many looks of the cluster ask at once."""
        key = (ref, namespace)
        started = time.monotonic()
        if self._own_reads.get(key, 0) >= _OWN_READS_AT_ONCE:
            return await self.read(ref, namespace, float("inf"), started)
        self._own_reads[key] = self._own_reads.get(key, 0) + 1
        try:
            at = datetime.now(UTC)
            try:
                obj = await asyncio.to_thread(self._read_one, ref, namespace, name)
            except KubeError as err:
                return started, at, err
            return started, at, {} if obj is None else {name: obj}
        finally:
            self._own_reads[key] -= 1


class ObserveActivities:
    def __init__(self, reads: SharedReads | None = None,
                 http: Callable[[], httpx.AsyncClient] = lambda: httpx.AsyncClient()):
        self._reads = reads or SharedReads()
        self._new_http = http
        self._http: httpx.AsyncClient | None = None

    @activity.defn(name=ACTIVITY_OBSERVE)
    async def observe(self, input: ObserveDeploymentInput) -> Observation:
        """Answers at once when `known` is None, else on news or after `report_seconds`."""
        # A retried attempt (its worker was lost) carries on the observation: the cluster's last read and the
        # report period both count from the first attempt.
        previous = activity.info().heartbeat_details if activity.in_activity() else []
        heard = {"at": previous[0] if previous and isinstance(previous[0], str) else ""}
        beating = asyncio.create_task(self._heartbeat(heard)) if activity.in_activity() else None
        try:
            return await self._observe(input, heard)
        except asyncio.CancelledError:
            # Its worker shuts down: a failed attempt, which the server starts again at once on another
            # worker (a cancel it did not ask for would be refused, and the look waited for its heartbeat
            # timeout instead).
            if activity.in_activity() and activity.is_worker_shutdown():
                raise ApplicationError("the look's worker is shutting down", type="WorkerShutdown") from None
            raise
        finally:
            if beating is not None:
                beating.cancel()

    async def _observe(self, input: ObserveDeploymentInput, heard: dict[str, str]) -> Observation:
        answer_by = _answer_by(input.report_seconds)
        not_before = float("-inf")
        frontend: FrontendCheck | None = None
        probed_at = float("-inf")
        judged: tuple[object, FrontendCheck | None, Observation, str] | None = None  # what the last read showed
        while True:
            if input.known is None:
                # Asked to answer at once (the workflow knows nothing, or just changed something): no read
                # taken before this observation started will do, and any read answers.
                started, at, dgds = await self._reads.fresh(input.kubeconfig, input.namespace, input.name)
            else:
                started, at, dgds = await self._reads.read(input.kubeconfig, input.namespace, input.status_seconds,
                                                          not_before)
            if isinstance(dgds, KubeError):
                seen, judged = Observation(cluster=input.cluster, at=at, reachable=False, error=str(dgds)), None
                key = seen.news_key()
            else:
                obj = dgds.get(input.name)
                live = obj is not None and not (obj.get("metadata") or {}).get("deletionTimestamp")
                if not live:
                    frontend, probed_at = None, float("-inf")  # a new deployment is probed at once
                elif input.served_model_name is not None and time.monotonic() - probed_at >= input.probe_seconds:
                    assert obj is not None
                    frontend, probed_at = await self._probe(frontend_url_of(obj), input.probe_timeout_seconds), \
                        time.monotonic()
                version = _version(obj)
                if judged is not None and judged[0] == version and judged[1] == frontend:
                    seen, key = judged[2], judged[3]  # the same object, the same answer: the same news
                else:
                    seen = read_observation(input.cluster, at, obj, frontend)
                    key = seen.news_key()
                    judged = (version, frontend, seen, key)
            heard["at"] = at.isoformat()
            if key != input.known or time.monotonic() >= answer_by:
                return seen if seen.at == at else seen.model_copy(update={"at": at})
            # The next read starts one status period after this one did (or is a newer one another
            # observation asked for): every observation of the cluster judges every read.
            not_before = started + _NEWER
            await asyncio.sleep(max(0.0, started + input.status_seconds - time.monotonic()))

    async def _heartbeat(self, heard: dict[str, str]) -> None:
        """Alive, and when the cluster last answered (an ISO time; empty before the first read)."""
        timeout = activity.info().heartbeat_timeout
        every = timeout.total_seconds() / 3 if timeout else HEARTBEAT_SECONDS
        while True:
            activity.heartbeat(heard["at"])
            await asyncio.sleep(every)

    async def _probe(self, url: str, seconds: float) -> FrontendCheck:
        if self._http is None:
            self._http = self._new_http()  # one client (one TLS context and pool) for every probe
        try:
            # The frontend gets `seconds` to connect and answer; waiting for one of this worker's own
            # connections is not its time (thousands of looks probing at once timed out in the pool,
            # and serving frontends were called unreachable).
            resp = await self._http.get(url.rstrip("/") + "/v1/models", timeout=httpx.Timeout(seconds, pool=None))
            if resp.status_code != 200:
                return FrontendCheck(url=url, error=f"HTTP {resp.status_code}")
            data = resp.json().get("data") or []
            return FrontendCheck(url=url, models=[m["id"] for m in data if isinstance(m, dict) and "id" in m])
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            return FrontendCheck(url=url, error=type(exc).__name__)

    def all(self) -> list[Callable]:
        return [self.observe]


# A read "newer" than one judged: started after it (monotonic seconds).
_NEWER = 1e-6


def _version(obj: dict[str, Any] | None) -> object:
    """What identifies one state of a DGD as the API serves it: a new object or any write (spec or status)
    changes it."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    return meta.get("uid"), meta.get("resourceVersion"), meta.get("deletionTimestamp")


def _answer_by(report_seconds: float) -> float:
    """When an observation with no news answers (monotonic clock): `report_seconds` after its first attempt was
    scheduled, so an attempt retried after a lost worker keeps the observation's period."""
    waited = 0.0
    if activity.in_activity() and activity.info().attempt > 1:
        waited = max(0.0, time.time() - activity.info().scheduled_time.timestamp())
    return time.monotonic() + report_seconds - waited

"""Temporal activity: a workload's observation of its deployment on one cluster, waiting for news.

A serving workload hears from each of its clusters through one observation at a time. It reads the
DGD (metadata and status) every `status_seconds` and, when asked, probes its frontend's
`/v1/models` every `probe_seconds`, and answers with an `Observation` for
`wingsmith.domain.reconcile.judge` only when there is news: what `judge` can tell apart
(`Observation.news_key`) differs from what the workflow last acted on (`known`), or
`report_seconds` passed. A workload whose clusters serve as applied so costs its workflow one
activity every `report_seconds`, not one per status period, and a change is still seen within one.

Reads are shared: every observation of the process on the same cluster and namespace takes its answer from
one LIST per status period (`SharedReads`), and probes are plain GETs, at most `_PROBES_AT_ONCE` at a time
(`_get`: httpx's pool was most of a watching worker's CPU), so a worker watches thousands of deployments
with a few requests a second. Observations keep time by the reads, not by themselves: each waits for the
read that starts one status period after the one it judged (or takes a newer one another observation asked
for), so all of a cluster's observations judge every read, and a change is seen within one status period of
happening. A deployment whose object (uid, resourceVersion) and frontend answer did not change since the
last read is not judged again.

It changes nothing, so any number of retries or duplicate runs are harmless. A cluster that cannot
be read is an answer, not a failure: the observation says unreachable and why, and the workflow's
grace decides what that means. While it waits the observation heartbeats with the time of its last
read, so a workflow whose observation died with its worker knows when the cluster was last heard from.
It heartbeats half its heartbeat timeout apart, a new one first half a timeout after it starts (the
SDK sends at most one per 0.8 of it, so the server hears one about every 0.8 of it either way; a third
apart cost the worker half as many calls again): the heartbeats of thousands of waiting observations
are most of the Temporal server's requests (bench/watching.py).

Async (it mostly waits): it runs on the observe task queue (`wingsmith.domain.config.observe_task_queue`),
whose worker holds thousands of them at once; the blocking LIST runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import certifi
import httptools
import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from contracts.workload import ACTIVITY_OBSERVE, ObserveDeploymentInput
from contracts.workload import last_heard as last_heard  # the workflow reads the heartbeat it writes
from wingsmith.adapters.kube import DgdClient, KubeconfigRef, KubeError, shared_api_client
from wingsmith.adapters.kube.dgd import frontend_url_of
from wingsmith.domain.reconcile import FrontendCheck, Observation, read_observation

# An observation is cheap and repeated: a few quick attempts (one flaky 500 is not a partition); a cluster
# whose API refuses or fails them all is unreachable *this time*. Each call gets 3 s to connect and
# 5 s to answer, so a hung API is an unreachable answer within seconds, not a hung observation.
_ATTEMPTS = 5
_REQUEST_TIMEOUT = (3.0, 5.0)
# Without a heartbeat timeout (a test's environment), this often.
HEARTBEAT_SECONDS = 1.0


Reader = Callable[[KubeconfigRef, str], dict[str, dict[str, Any]]]
# One deployment by name: its object, or None when there is none.
OneReader = Callable[[KubeconfigRef, str, str], dict[str, Any] | None]

# Frontend probes in flight at once, per worker (as many as the HTTP pool used to hold). A probe waits for
# its turn here, and its `seconds` start when it has it.
_PROBES_AT_ONCE = 100
# A /v1/models answer larger than this is no model list.
_PROBE_MAX_BYTES = 1 << 20

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

    async def get(self, ref: KubeconfigRef, namespace: str, max_age: float, not_before: float = float("-inf"),
                  after: datetime | None = None) -> tuple[datetime, dict[str, dict[str, Any]] | KubeError]:
        """A read started less than `max_age` ago, and not before `not_before` (monotonic) nor `after` (the
        clock): an observation asked for what is there now, after a change the plane just made, must not
        get an older read, nor one older than the read its workflow last acted on."""
        _, at, result = await self.read(ref, namespace, max_age, not_before, after)
        return at, result

    async def read(self, ref: KubeconfigRef, namespace: str, max_age: float, not_before: float = float("-inf"),
                   after: datetime | None = None) -> tuple[float, datetime, dict[str, dict[str, Any]] | KubeError]:
        """As `get`, with when the read started (monotonic), which sets when the next one is due."""
        key = (ref, namespace)

        def recent_enough(last: tuple[float, datetime, object]) -> bool:
            return last[0] >= not_before and (after is None or last[1] >= after)
        while True:
            last = self._last.get(key)
            if last is not None and recent_enough(last) and time.monotonic() - last[0] < max_age:
                return last
            running = self._inflight.get(key)
            if running is not None:
                await asyncio.shield(running)
                last = self._last.get(key)
                if last is not None and recent_enough(last):
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
                 http: Callable[[], httpx.AsyncClient] | None = None):
        """`http`: probe through this httpx client instead of the plain one (`_get`); so does a worker
        whose environment names a proxy (httpx honours it)."""
        self._reads = reads or SharedReads()
        if http is None and any(os.environ.get(v) for v in _PROXY_VARIABLES):
            http = httpx.AsyncClient
        self._new_http = http
        self._http: httpx.AsyncClient | None = None
        self._probing: asyncio.Semaphore | None = None
        self._tls: ssl.SSLContext | None = None

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
                # Not a read older than the one the workflow acted on: a LIST shared with other looks may
                # have started before the workflow's own fresh GET, and say a deployment just applied is
                # missing (at 5,000 workloads, 365 needless heals).
                started, at, dgds = await self._reads.read(input.kubeconfig, input.namespace, input.status_seconds,
                                                          not_before, input.known_at)
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
        every = timeout.total_seconds() / 2 if timeout else HEARTBEAT_SECONDS
        # A new look has nothing to say before its first read, and the timeout counts from its start: a
        # heartbeat at once was one more per look than its period needs (a retried one says at once when
        # the cluster was last heard from).
        if heard["at"]:
            activity.heartbeat(heard["at"])
        while True:
            await asyncio.sleep(every)
            activity.heartbeat(heard["at"])

    async def _probe(self, url: str, seconds: float) -> FrontendCheck:
        if self._probing is None:
            self._probing = asyncio.Semaphore(_PROBES_AT_ONCE)
        try:
            # The frontend gets `seconds` to connect and answer; waiting for its turn among this worker's
            # probes is not its time (thousands of looks probing at once timed out in the pool, and
            # serving frontends were called unreachable).
            async with self._probing:
                if self._new_http is not None:
                    if self._http is None:
                        self._http = self._new_http()  # one client (one TLS context and pool) for every probe
                    resp = await self._http.get(url.rstrip("/") + "/v1/models",
                                                timeout=httpx.Timeout(seconds, pool=None))
                    status, body = resp.status_code, resp.content
                else:
                    status, body = await self._get(url.rstrip("/") + "/v1/models", seconds)
            if status != 200:
                return FrontendCheck(url=url, error=f"HTTP {status}")
            data = json.loads(body).get("data") or []
            return FrontendCheck(url=url, models=[m["id"] for m in data if isinstance(m, dict) and "id" in m])
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            return FrontendCheck(url=url, error=type(exc).__name__)

    async def _get(self, url: str, seconds: float) -> tuple[int, bytes]:
        """One GET on its own connection, closed after it: a probe every `probe_seconds` reuses no
        connection anyway (kept-alive ones expire sooner), and httpx's pool cost ~1.5 ms of CPU per probe,
        most of a watching worker's CPU (its pool matches every waiting request against every connection
        on each request's start and end: a cluster's looks, which wake on the same read, probing together
        made that quadratic, and starved frontends timed out). This costs ~0.3 ms; httptools parses the answer
        as it arrives, as in the gateway's backend client. Failures carry the names httpx gives them (what a
        look reports: ConnectError, ConnectTimeout, ReadTimeout...)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise httpx.UnsupportedProtocol(f"cannot probe {url!r}")
        tls = None
        if parts.scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context(cafile=certifi.where())  # as httpx verifies
            tls = self._tls
        host, port = parts.hostname, parts.port or (443 if tls else 80)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authority = parts.netloc.rsplit("@", 1)[-1]
        deadline = asyncio.get_running_loop().time() + seconds
        try:
            async with asyncio.timeout_at(deadline):
                reader, writer = await asyncio.open_connection(host, port, ssl=tls)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {authority}") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from None
        answer = _Answer()
        try:
            async with asyncio.timeout_at(deadline):
                writer.write(f"GET {target} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\n"
                             "User-Agent: wingsmith-watch\r\nConnection: close\r\n\r\n".encode("latin-1"))
                while not answer.complete and len(answer.body) < _PROBE_MAX_BYTES:
                    if not (data := await reader.read(_PROBE_MAX_BYTES)):
                        if answer.status and not answer.framed:  # the body ends with the connection
                            break
                        raise httpx.RemoteProtocolError("closed before the answer's end")
                    answer.parser.feed_data(data)
            return answer.status, bytes(answer.body[:_PROBE_MAX_BYTES])
        except TimeoutError:
            raise httpx.ReadTimeout(f"reading from {authority}") from None
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            raise httpx.RemoteProtocolError(type(exc).__name__) from None
        except OSError as exc:
            raise httpx.ReadError(str(exc)) from None
        finally:
            writer.close()

    def all(self) -> list[Callable]:
        return [self.observe]


class _Answer:
    """A probe's answer as httptools reads it."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0  # known once the head is read
        self.framed = False  # by a length or chunks; else the body ends with the connection
        self.body = bytearray()
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.framed = self.framed or name.lower() in (b"content-length", b"transfer-encoding")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True


# A worker with any of these set probes through httpx, which goes through the proxy they name.
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")

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
    scheduled, as its schedule-to-close timeout counts, so an attempt retried after a lost worker keeps the
    observation's period, and one a busy worker began late still answers before that timeout (counted from
    its own start, looks begun a minute late at 5,000 workloads timed out unanswered)."""
    scheduled = activity.info().scheduled_time.timestamp() if activity.in_activity() else 0.0
    # 0: not known (a test's activity environment), so it counts from now.
    waited = max(0.0, time.time() - scheduled) if scheduled > 0 else 0.0
    return time.monotonic() + report_seconds - waited

"""What keeps watching thousands of workloads cheap without seeing faults later (bench/watching.py
measures it): the looks of one cluster judge every shared read, so a change is seen within one status
period whatever a look's own phase; an unchanged deployment is not judged again; looks heartbeat
half their heartbeat timeout apart, and that timeout follows the watch's silence period; a worker
that shuts down fails its looks (retried elsewhere at once) rather than leaving them to time out."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from temporalio.activity import ActivityCancellationDetails
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import activities.observe as observe_module
from activities.observe import ObserveActivities, SharedReads
from contracts.workload import ObserveDeploymentInput, WatchSettings
from wingsmith.adapters.kube import KubeconfigRef
from wingsmith.domain.reconcile import Observation, read_observation
from workflows import policies

REF = KubeconfigRef(source="/fake/kubeconfig", context="sim-east")


def _dgd(name: str, version: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": str(version), "generation": 1},
            "spec": {}, "status": {"state": "successful", "observedGeneration": 1,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


class Cluster:
    """A cluster's DGDs as LIST answers them; `delete_after(n)` deletes one right after the n-th read
    started, the worst moment for a look, which must then wait for the next read."""

    def __init__(self, names: list[str]) -> None:
        self.dgds = {n: _dgd(n, 1) for n in names}
        self.reads: list[float] = []
        self.doomed: tuple[int, str] | None = None
        self.deleted_at: float | None = None
        self.lock = threading.Lock()

    def delete_after(self, read: int, name: str) -> None:
        self.doomed = (read, name)

    def read(self, ref: KubeconfigRef, namespace: str) -> dict[str, dict[str, Any]]:
        with self.lock:
            self.reads.append(time.monotonic())
            answer = dict(self.dgds)
            if self.doomed and len(self.reads) == self.doomed[0]:
                del self.dgds[self.doomed[1]]
                self.deleted_at = time.monotonic()
            return answer


def _params(name: str, known: str | None, status: float = 0.5, report: float = 60) -> ObserveDeploymentInput:
    return ObserveDeploymentInput(cluster="sim-east", kubeconfig=REF, namespace="default", name=name,
                                  served_model_name=None, known=known, status_seconds=status, probe_seconds=60,
                                  report_seconds=report)


def _known(name: str) -> str:
    return read_observation("sim-east", observe_module.datetime.now(observe_module.UTC), _dgd(name, 1)).news_key()


def test_a_look_that_joined_between_reads_still_sees_a_change_within_one_status_period() -> None:
    """Look `b` starts 0.35 s into `a`'s 0.5 s period and takes `a`'s read; its DGD is deleted just after
    a read started. Looks that kept their own time saw it up to two periods later (0.85 s here)."""
    cluster = Cluster(["a", "b"])
    looks = ObserveActivities(reads=SharedReads(cluster.read))

    async def scenario() -> tuple[Observation, float]:
        a = asyncio.ensure_future(ActivityEnvironment().run(looks.observe, _params("a", _known("a"))))
        await asyncio.sleep(0.35)
        cluster.delete_after(len(cluster.reads) + 2, "b")
        seen = await asyncio.wait_for(ActivityEnvironment().run(looks.observe, _params("b", _known("b"))), 5)
        answered = time.monotonic()
        a.cancel()
        return seen, answered
    seen, answered = asyncio.run(scenario())
    assert not seen.exists and cluster.deleted_at is not None
    took = answered - cluster.deleted_at
    assert took < 0.5 + 0.15, f"seen {took:.2f} s after the delete, more than one status period"
    # One LIST per period for both looks, not one each.
    gaps = [later - earlier for earlier, later in zip(cluster.reads, cluster.reads[1:], strict=False)]
    assert all(gap > 0.4 for gap in gaps), gaps


def test_an_unchanged_deployment_is_judged_once_however_often_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(["a"])
    judged: list[dict[str, Any] | None] = []

    def counting(cluster_name: str, at: Any, obj: dict[str, Any] | None, frontend: Any = None) -> Observation:
        judged.append(obj)
        return read_observation(cluster_name, at, obj, frontend)
    monkeypatch.setattr(observe_module, "read_observation", counting)
    looks = ObserveActivities(reads=SharedReads(cluster.read))

    async def scenario() -> Observation:
        look = asyncio.ensure_future(ActivityEnvironment().run(looks.observe, _params("a", _known("a"), status=0.1)))
        await asyncio.sleep(0.55)
        assert len(cluster.reads) >= 5 and len(judged) == 1, (len(cluster.reads), len(judged))
        cluster.dgds["a"] = {**_dgd("a", 2), "status": {"state": "pending"}}  # the operator wrote its status
        return await asyncio.wait_for(look, 2)
    seen = asyncio.run(scenario())
    assert len(judged) == 2 and seen.state == "pending" and not seen.ready


def test_a_quiet_answer_carries_the_time_of_its_last_read() -> None:
    cluster = Cluster(["a"])
    looks = ObserveActivities(reads=SharedReads(cluster.read))
    started = observe_module.datetime.now(observe_module.UTC)
    seen = asyncio.run(ActivityEnvironment().run(looks.observe, _params("a", _known("a"), status=0.1, report=0.5)))
    assert seen.news_key() == _known("a") and (seen.at - started).total_seconds() >= 0.35


def test_looks_heartbeat_half_their_heartbeat_timeout_apart() -> None:
    cluster = Cluster(["a"])
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=0.6))
    beats: list[float] = []
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())
    started = time.monotonic()
    asyncio.run(env.run(ObserveActivities(reads=SharedReads(cluster.read)).observe,
                        _params("a", _known("a"), status=0.1, report=1.0)))
    # At 0.3, 0.6, 0.9 within the 1 s report period: none at the start, which tells the server nothing.
    assert 2 <= len(beats) <= 3 and beats[0] - started >= 0.25, [b - started for b in beats]


def test_the_heartbeat_timeout_follows_the_silence_period() -> None:
    """A look lost with its worker is started again within the silence period (never under 6 s): the
    looks' heartbeats were most of the Temporal server's work with a fixed 6 s."""
    watch = WatchSettings()
    config = policies.observe("q-observe", watch.report_seconds, watch.silence_seconds)
    assert config["heartbeat_timeout"] == timedelta(seconds=watch.silence_seconds) == timedelta(seconds=60)
    assert policies.observe("q", 2, 3)["heartbeat_timeout"] == timedelta(seconds=6)


def test_a_worker_shutting_down_fails_its_looks_so_they_start_again_elsewhere() -> None:
    cluster = Cluster(["a"])
    env = ActivityEnvironment()

    async def scenario() -> None:
        look = asyncio.ensure_future(env.run(ObserveActivities(reads=SharedReads(cluster.read)).observe,
                                             _params("a", _known("a"), status=0.1)))
        await asyncio.sleep(0.3)
        env.worker_shutdown()
        env.cancel(ActivityCancellationDetails(worker_shutdown=True))
        await look
    with pytest.raises(ApplicationError) as err:
        asyncio.run(scenario())
    assert err.value.type == "WorkerShutdown" and not err.value.non_retryable


def test_a_new_deployment_reads_itself_not_the_whole_namespace() -> None:
    """Workloads placed one after another each started a look asked to answer at once, and each such look
    made a LIST of the whole namespace (thousands of DGDs at scale). It reads its own DGD instead; looks
    arriving together past a few at once share one fresh LIST, as a restarting plane's looks do."""
    cluster = Cluster([f"w{i}" for i in range(40)])
    gets: list[str] = []

    def get(ref: KubeconfigRef, namespace: str, name: str) -> dict[str, Any] | None:
        gets.append(name)
        time.sleep(0.05)
        return cluster.dgds.get(name)
    looks = ObserveActivities(reads=SharedReads(cluster.read, get))

    one = asyncio.run(ActivityEnvironment().run(looks.observe, _params("w1", None)))
    gone = asyncio.run(ActivityEnvironment().run(looks.observe, _params("absent", None)))
    assert one.exists and one.ready and not gone.exists
    assert gets == ["w1", "absent"] and cluster.reads == []

    async def together() -> list[Observation]:
        return await asyncio.gather(*(ActivityEnvironment().run(looks.observe, _params(f"w{i}", None))
                                      for i in range(40)))
    seen = asyncio.run(together())
    assert all(s.exists and s.ready for s in seen)
    assert len(gets) - 2 <= 8 and 1 <= len(cluster.reads) <= 2, (len(gets), len(cluster.reads))


def test_a_probe_reads_any_http_answer_and_names_its_failures_as_httpx_did() -> None:
    """Probes go over a plain connection each (httpx's pool cost most of a watching worker's CPU): the
    answer is read however it is framed, and failures keep the names a look reports."""
    bodies = {b"/length": b'{"data": [{"id": "m"}]}', b"/chunked": b'{"data": [{"id": "c"}]}',
              b"/close": b'{"data": [{"id": "z"}]}'}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        path = (await reader.readuntil(b"\r\n\r\n")).split(b" ")[1].removesuffix(b"/v1/models")
        if path == b"/hang":
            await asyncio.sleep(2)
        elif path == b"/chunked":
            body = bodies[path]
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for part in (body[:7], body[7:]):
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        elif path == b"/close":
            writer.write(b"HTTP/1.0 200 OK\r\n\r\n" + bodies[path][:5])
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(bodies[path][5:])
        elif path == b"/missing":
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        elif path == b"/short":  # closed before the length it announced
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"data\": []}")
        elif path == b"/garbage":
            writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        elif path == b"/endless":  # more than a model list, and no end: the probe stops reading
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(20):
                writer.write(b"10000\r\n%s\r\n" % (b" " * 0x10000))
            await writer.drain()
            await asyncio.sleep(2)
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(bodies[path]), bodies[path]))
        await writer.drain()
        writer.close()

    async def scenario() -> dict[str, Any]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        looks = ObserveActivities(reads=SharedReads(Cluster([]).read))
        with_closed_port = await asyncio.start_server(serve, "127.0.0.1", 0)
        closed = with_closed_port.sockets[0].getsockname()[1]
        with_closed_port.close()
        await with_closed_port.wait_closed()
        async with server:
            seen = {p: await looks._probe(f"http://127.0.0.1:{port}{p}/", 1.0)
                    for p in ("/length", "/chunked", "/close", "/missing", "/hang", "/short", "/garbage",
                              "/endless")}
            seen["refused"] = await looks._probe(f"http://127.0.0.1:{closed}/", 1.0)
            seen["scheme"] = await looks._probe("ftp://127.0.0.1/", 1.0)
            return seen
    seen = asyncio.run(scenario())
    assert [seen[p].models for p in ("/length", "/chunked", "/close")] == [["m"], ["c"], ["z"]]
    assert {p: seen[p].error for p in ("/missing", "/hang", "refused", "scheme", "/short", "/garbage", "/endless")
            } == {"/missing": "HTTP 404", "/hang": "ReadTimeout", "refused": "ConnectError",
                  "scheme": "UnsupportedProtocol", "/short": "RemoteProtocolError", "/garbage": "RemoteProtocolError",
                  "/endless": "JSONDecodeError"}


def test_a_look_takes_no_shared_read_older_than_what_its_workflow_knows() -> None:
    """A workload placed just after another look's LIST: its first look GETs its new DGD and answers; its
    next look must not take that older LIST, which says the DGD is missing (at 5,000 workloads the bench
    saw 365 needless heals). It waits for a read that started after the one its workflow acted on."""
    cluster = Cluster(["old"])
    shared = SharedReads(cluster.read, lambda ref, ns, name: cluster.dgds.get(name))
    looks = ObserveActivities(reads=shared)

    async def scenario() -> tuple[Observation, Observation]:
        await shared.get(REF, "default", 10)  # another workload's look LISTs the namespace
        cluster.dgds["new"] = _dgd("new", 1)  # applied right after that LIST started
        first = await ActivityEnvironment().run(looks.observe, _params("new", None))  # its own GET
        params = _params("new", first.news_key(), report=0.3).model_copy(update={"known_at": first.at})
        return first, await ActivityEnvironment().run(looks.observe, params)
    first, second = asyncio.run(scenario())
    assert first.exists and second.exists and second.news_key() == first.news_key()
    assert second.at >= first.at and len(cluster.reads) >= 2


def test_a_look_begun_late_still_answers_before_its_schedule_to_close_timeout() -> None:
    """A busy worker may begin a look well after the server scheduled it: its report period counts from
    the scheduling, as the server's timeout does, so it answers in time rather than timing out unanswered."""
    cluster = Cluster(["a"])
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, scheduled_time=observe_module.datetime.now(observe_module.UTC)
                                   - timedelta(seconds=50))
    started = time.monotonic()
    seen = asyncio.run(env.run(ObserveActivities(reads=SharedReads(cluster.read)).observe,
                               _params("a", _known("a"), status=0.1, report=51)))
    assert seen.exists and time.monotonic() - started < 3

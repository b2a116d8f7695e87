"""The gateway as an attacker meets it (issue 47): a real `python -m gateway` process, real sockets,
and a raw backend that answers `103 Early Hints` before every final answer. Slowloris on the head and
the body, stalled `100-continue`, a body sent without a key, early hints with two clients on one pooled
backend connection, CL+TE and duplicate lengths, pipelining, a client leaving mid-stream, thousands of
idle connections. Each test checks that the gateway's memory (its RSS, sampled as the test runs) stays
bounded and that no client is given another's answer."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from wingsmith.adapters.gateway import LocalGatewayClient
from wingsmith.domain.gateway import Backend, EndpointRoutes
from wingsmith.local.ports import free_port
from wingsmith.local.temporal_server import stop_process, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"m1": "sk-client-a-for-m1", "m2": "sk-client-b-for-m2"}
HEAD_TIMEOUT, BODY_TIMEOUT = 2.0, 3.0
MAX_HELD = 32 * 1024 * 1024  # the default
RSS_HEADROOM = 50 * 1024 * 1024  # the bound over the gateway's idle size
TEN_MB = 10 * 1024 * 1024


class HintingBackend:
    """A raw HTTP/1.1 backend, kept-alive: `GET /v1/models` lists m1 and m2; `POST .../chat/completions`
    answers `103 Early Hints`, then (50 ms later) a 200 naming the model and echoing the request's
    `user` field (each client's secret tag); a `"stream": true` request gets server-sent events, one per
    100 ms. It counts connections, requests, and streams whose client went away."""

    def __init__(self) -> None:
        self.connections = 0
        self.chats = 0
        self.streams_cut = 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                if head.startswith(b"GET"):
                    listed = json.dumps({"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(listed), listed))
                    continue
                self.chats += 1
                request = json.loads(body)
                writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </hint.css>; rel=preload\r\n\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)
                if request.get("stream"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                 b"transfer-encoding: chunked\r\n\r\n")
                    try:
                        for i in range(50):
                            event = b"data: %d\n\n" % i
                            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                            await writer.drain()
                            await asyncio.sleep(0.1)
                    except ConnectionError:
                        self.streams_cut += 1
                        return
                    writer.write(b"0\r\n\r\n")
                    continue
                answer = json.dumps({"model": request["model"], "tag": request.get("user")}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(answer), answer))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            if not writer.is_closing():
                writer.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class GatewayProcess:
    """`python -m gateway` with short deadlines, client keys for m1 and m2, both routed to one backend."""

    def __init__(self, tmp: Path, backend: HintingBackend, *extra: str):
        token = tmp / "token"
        token.write_text("abuse-admin-token\n")
        keys = tmp / "keys.json"
        keys.write_text(json.dumps({m: [hashlib.sha256(k.encode()).hexdigest()] for m, k in KEYS.items()}))
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "--port", str(self.port), "--state-dir", str(tmp / "state"),
             "--admin-token-ref", f"file:{token}", "--client-keys-ref", f"file:{keys}", "--log-level", "ERROR",
             "--head-timeout", str(HEAD_TIMEOUT), "--body-timeout", str(BODY_TIMEOUT), "--keep-alive-timeout", "5",
             "--max-connections-per-client", "3000", *extra], cwd=ROOT)
        try:
            wait_for_port("127.0.0.1", self.port, 60, self.proc, "the gateway")
            self.admin = LocalGatewayClient(f"http://127.0.0.1:{self.port}", f"file:{token}")
            for model in KEYS:
                self.admin.set_routes(EndpointRoutes(model_name=model, backends=[Backend(
                    id=f"sim/{model}", cluster="sim", workload_id="wl", url=backend.url, weight=1)]))
        except BaseException:
            stop_process(self.proc, 10)
            raise
        self.ps = psutil.Process(self.proc.pid)

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def stop(self) -> None:
        self.admin.close()
        stop_process(self.proc, 10)


class PeakRss:
    """The gateway's largest RSS while the block runs, sampled every 20 ms."""

    def __init__(self, gateway: GatewayProcess):
        self.gateway = gateway
        self.idle = gateway.rss()
        self.peak = self.idle
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.gateway.rss())

    def __enter__(self) -> PeakRss:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def assert_bounded(self) -> None:
        grown = self.peak - self.idle
        assert grown <= RSS_HEADROOM, f"the gateway grew by {grown / 2**20:.0f} MB (idle {self.idle / 2**20:.0f} MB)"


@pytest.fixture(scope="module")
def backend() -> Iterator[HintingBackend]:
    made = HintingBackend()
    yield made
    made.stop()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, backend: HintingBackend) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("abuse"), backend)
    yield gw
    gw.stop()


def chat(model: str, tag: str, *, key: str | None = None, stream: bool = False, extra: bytes = b"") -> bytes:
    body = json.dumps({"model": model, "user": tag, "stream": stream,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    auth = b"authorization: Bearer %s\r\n" % (key or KEYS[model]).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n%s%s\r\n%s" % (len(body), auth, extra, body))


class Conn:
    """A raw client connection that reads whole answers (content-length or chunked)."""

    def __init__(self, port: int, timeout: float = 10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError(f"closed; got {self.buf[:200]!r}")
        self.buf += data

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            self._fill()
        part, self.buf = self.buf.split(marker, 1)
        return part

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        head = self._until(b"\r\n\r\n").decode()
        status = int(head.split(" ", 2)[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])}
        if 100 <= status < 200:
            return status, headers, b""
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int(self._until(b"\r\n"), 16):
                while len(self.buf) < size + 2:
                    self._fill()
                body, self.buf = body + self.buf[:size], self.buf[size + 2:]
            self._until(b"\r\n")
            return status, headers, body
        length = int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, headers, body

    def closed_within(self, seconds: float) -> bool:
        """The gateway closes the connection within `seconds` (whatever it sends first is kept in buf)."""
        self.sock.settimeout(seconds)
        try:
            while data := self.sock.recv(65536):
                self.buf += data
        except TimeoutError:
            return False
        except ConnectionResetError:
            pass
        return True

    def close(self) -> None:
        self.sock.close()


def error_code(body: bytes) -> str:
    return str(json.loads(body)["error"]["code"])


def test_early_hints_never_give_one_clients_answer_to_another(gateway, backend):
    """Client A (key of m1) and client B (key of m2), 0.3 s apart, then interleaved: each gets its own
    answer, on one pooled backend connection."""
    with PeakRss(gateway) as rss:
        before = backend.connections
        a, b = Conn(gateway.port), Conn(gateway.port)
        for round_ in range(5):
            a.send(chat("m1", f"secret-a-{round_}"))
            time.sleep(0.3 if round_ == 0 else 0)
            b.send(chat("m2", f"secret-b-{round_}"))
            for conn, model, tag in ((a, "m1", f"secret-a-{round_}"), (b, "m2", f"secret-b-{round_}")):
                status, _, body = conn.answer()
                assert status == 200, body
                assert json.loads(body) == {"model": model, "tag": tag}
        for round_ in range(5):  # one after the other: one pooled connection carries them all
            for conn, model in ((a, "m1"), (b, "m2")):
                conn.send(chat(model, f"{model}-{round_}"))
                assert json.loads(conn.answer()[2]) == {"model": model, "tag": f"{model}-{round_}"}
        a.close()
        b.close()
    assert backend.connections - before <= 2  # at most one per client in flight at once, reused
    rss.assert_bounded()


def test_a_body_without_a_valid_key_is_refused_before_it_is_read(gateway, backend):
    chats = backend.chats
    with PeakRss(gateway) as rss:
        for auth in (b"", b"authorization: Bearer sk-guess\r\n"):
            # With Expect: the final answer comes instead of 100 Continue; the body is never asked for.
            conn = Conn(gateway.port)
            conn.send(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
                      b"content-length: %d\r\nexpect: 100-continue\r\n%s\r\n" % (TEN_MB, auth))
            status, headers, body = conn.answer()
            assert status == 401 and error_code(body) in ("missing_api_key", "invalid_api_key")
            assert headers["connection"] == "close" and conn.closed_within(2)
            conn.close()
            # Without Expect: answered and closed after the head, the 10 MB never read.
            conn = Conn(gateway.port)
            conn.send(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-length: %d\r\n%s\r\n"
                      % (TEN_MB, auth) + b"x" * 1000)
            status, headers, _ = conn.answer()
            assert status == 401 and headers["connection"] == "close" and conn.closed_within(2)
            conn.close()
    assert backend.chats == chats
    rss.assert_bounded()


def _stall(port: int, request_head: bytes, send_bytes: int, results: list, index: int,
           read_continue: bool = False) -> None:
    """One attacker: the head, `send_bytes` of body, then nothing; records (seconds from the stall to
    the close, the status answered or None)."""
    conn = Conn(port, timeout=30)
    status = None
    try:
        conn.send(request_head)
        if read_continue:
            status, _, _ = conn.answer()
            assert status == 100
        piece = b"x" * (1 << 20)
        sent = 0
        while sent < send_bytes:
            chunk = piece[:min(len(piece), send_bytes - sent)]
            conn.sock.sendall(chunk)
            sent += len(chunk)
    except (ConnectionError, OSError):
        pass  # refused while sending: the gateway answered and closed
    stalled = time.monotonic()
    conn.closed_within(30)
    took = time.monotonic() - stalled
    if conn.buf.startswith(b"HTTP/1.1"):
        head = conn.buf.split(b"\r\n\r\n", 1)[0]
        final = [line for line in head.split(b"\r\n") if line.startswith(b"HTTP/1.1")]
        status = int(conn.buf.rsplit(b"HTTP/1.1 ", 1)[1][:3]) if final else status
    results[index] = (took, status)
    conn.close()


def _attack(gateway: GatewayProcess, head: bytes, send_bytes: int, read_continue: bool = False,
            count: int = 40) -> list[tuple[float, int | None]]:
    results: list = [None] * count
    threads = [threading.Thread(target=_stall, args=(gateway.port, head, send_bytes, results, i, read_continue))
               for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_forty_stalled_10_mb_bodies_are_closed_within_the_deadline_and_memory_stays_bounded(gateway, backend):
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nauthorization: Bearer %s\r\n\r\n" % (TEN_MB, KEYS["m1"].encode()))
    chats = backend.chats
    with PeakRss(gateway) as rss:
        results = _attack(gateway, head, TEN_MB - 100 * 1024)
    assert all(r is not None for r in results)
    # Each is answered (408 at the body's deadline, or 503 as soon as it would pass the bytes the
    # gateway may hold) and closed, none later than the deadline.
    assert {status for _, status in results} <= {408, 503}, results
    assert max(took for took, _ in results) <= BODY_TIMEOUT + 1.5, results
    assert backend.chats == chats
    rss.assert_bounded()
    assert Conn(gateway.port).closed_within(0.1) is False  # and it still takes connections


def test_forty_stalled_100_continue_requests_are_closed_within_the_deadline(gateway):
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nexpect: 100-continue\r\nauthorization: Bearer %s\r\n\r\n"
            % (TEN_MB, KEYS["m1"].encode()))
    with PeakRss(gateway) as rss:
        results = _attack(gateway, head, 0, read_continue=True)
    assert all(r is not None and r[1] == 408 for r in results), results
    assert max(took for took, _ in results) <= BODY_TIMEOUT + 1.0, results
    rss.assert_bounded()


def test_slowloris_heads_are_closed_at_the_head_deadline(gateway):
    """A head sent a byte at a time, and connections that send nothing: none outlives the head deadline."""
    with PeakRss(gateway) as rss:
        trickling = [Conn(gateway.port) for _ in range(20)]
        silent = [Conn(gateway.port) for _ in range(20)]
        started = time.monotonic()
        head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nx-slow: "
        for byte in head:
            for c in trickling:
                c.send(bytes([byte]))
        for _ in range(3):
            time.sleep(0.5)
            for c in trickling:
                c.send(b"a")  # still a byte now and then, never the end of the head
        assert all(c.closed_within(HEAD_TIMEOUT + 1.5) for c in trickling + silent)
        assert time.monotonic() - started <= HEAD_TIMEOUT + 1.5
        assert all(c.buf.startswith(b"HTTP/1.1 408") for c in trickling), [c.buf[:60] for c in trickling]
        assert all(c.buf == b"" for c in silent)  # nothing asked, nothing answered
        for c in trickling + silent:
            c.close()
    rss.assert_bounded()


@pytest.mark.parametrize("framing", [
    b"content-length: 10\r\ntransfer-encoding: chunked\r\n",
    b"transfer-encoding: chunked\r\ncontent-length: 10\r\n",
    b"content-length: 10\r\ncontent-length: 10\r\n",
    b"content-length: 10\r\ncontent-length: 12\r\n",
    b"content-length: 10, 12\r\n",
    b"transfer-encoding: chunked, identity\r\n",
], ids=["cl-te", "te-cl", "duplicate-cl", "conflicting-cl", "cl-list", "te-not-last-chunked"])
def test_ambiguous_framing_is_refused_and_the_connection_closed(gateway, backend, framing):
    chats = backend.chats
    with PeakRss(gateway) as rss:
        conn = Conn(gateway.port)
        # A smuggled second request rides behind the first: it must never reach the backend.
        conn.send(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer %s\r\n%s\r\n"
                  % (KEYS["m1"].encode(), framing) + b"0\r\n\r\n" + chat("m2", "smuggled"))
        status, headers, body = conn.answer()
        assert (status, error_code(body), headers["connection"]) == (400, "invalid_http", "close")
        assert conn.closed_within(2)
        conn.close()
    assert backend.chats == chats
    rss.assert_bounded()


def test_pipelined_chats_are_answered_in_order_each_its_own(gateway):
    with PeakRss(gateway) as rss:
        conn = Conn(gateway.port)
        sent = [("m1" if i % 2 == 0 else "m2", f"pipelined-{i}") for i in range(6)]
        conn.send(b"".join(chat(model, tag) for model, tag in sent) + b"GET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n")
        for model, tag in sent:
            status, _, body = conn.answer()
            assert status == 200 and json.loads(body) == {"model": model, "tag": tag}
        assert json.loads(conn.answer()[2])["status"] == "ok"
        conn.close()
    rss.assert_bounded()


def test_a_client_leaving_mid_stream_ends_the_backends_stream(gateway, backend):
    with PeakRss(gateway) as rss:
        cut = backend.streams_cut
        leaving = Conn(gateway.port)
        leaving.send(chat("m1", "leaver", stream=True))
        leaving._until(b"data: 1\n\n")  # two events in: the client goes away
        leaving.close()
        deadline = time.monotonic() + 5
        while backend.streams_cut == cut and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.streams_cut == cut + 1  # the gateway closed its backend connection for it
        other = Conn(gateway.port)  # and the next client gets its own answer, whole
        other.send(chat("m2", "after-the-leaver"))
        assert json.loads(other.answer()[2]) == {"model": "m2", "tag": "after-the-leaver"}
        other.close()
        status = gateway.admin.status("m1")
        assert status.in_flight == 0 and not status.backends[0].cooling_down
    rss.assert_bounded()


def test_two_thousand_idle_connections_hold_little_and_block_nobody(gateway):
    limit = 2000
    with PeakRss(gateway) as rss:
        idle = []
        for _ in range(limit):
            idle.append(Conn(gateway.port))
        busy = Conn(gateway.port)
        busy.send(chat("m1", "beside-the-idle"))
        assert json.loads(busy.answer()[2]) == {"model": "m1", "tag": "beside-the-idle"}
        busy.close()
        time.sleep(HEAD_TIMEOUT + 1.0)  # idle without a request: closed at the head deadline
        assert all(c.closed_within(0.5) for c in idle[:50])
        for c in idle:
            c.close()
    rss.assert_bounded()


def test_connections_past_the_cap_per_client_are_closed_as_they_come(tmp_path, backend):
    gw = GatewayProcess(tmp_path, backend, "--max-connections-per-client", "20")
    try:
        kept = [Conn(gw.port) for _ in range(20)]
        extra = Conn(gw.port)
        assert extra.closed_within(2) and extra.buf == b""
        kept[0].send(chat("m1", "within-the-cap"))
        assert json.loads(kept[0].answer()[2])["tag"] == "within-the-cap"
        for c in kept:
            c.close()
        time.sleep(0.3)  # their slots are given back
        again = Conn(gw.port)
        again.send(chat("m2", "after"))
        assert json.loads(again.answer()[2])["tag"] == "after"
        again.close()
    finally:
        gw.stop()


def test_the_bounds_are_checked_when_the_gateway_starts(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gateway", "--port", str(free_port()), "--state-dir",
                           str(tmp_path / "state"), "--body-timeout", "0"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ})
    assert done.returncode == 2 and "body_timeout must be a positive number" in done.stderr

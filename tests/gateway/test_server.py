"""The gateway's HTTP/1.1 server (uvicorn with the gateway's bounds, gateway/serving.py), spoken to
byte by byte over a socket: keep-alive and its end, pipelining, `Expect: 100-continue`, chunked bodies
both ways, what it refuses, and stopping with an answer in flight. The proxying itself is tested in
test_local_gateway.py, the bounds on slow and hostile clients in test_abuse.py."""

from __future__ import annotations

import email.utils
import json
import socket
import threading
import time

import httpx
import pytest

from gateway.bounds import Bounds
from tests.gateway.conftest import MODEL, RunningGateway
from tests.gateway.test_local_gateway import routes, wait_until

CHAT = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Say hello"}]}).encode()


def post(body: bytes = CHAT, *, path: str = "/v1/chat/completions", version: str = "1.1",
         extra: str = "") -> bytes:
    return (f"POST {path} HTTP/{version}\r\nhost: gw\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n").encode() + body


class Raw:
    """A client socket that reads whole answers (by content-length or chunked framing)."""

    def __init__(self, url: str):
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buf += data
        return bool(data)

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            if not self._fill():
                raise ConnectionError(f"closed before {marker!r}; got {self.buf!r}")
        part, self.buf = self.buf.split(marker, 1)
        return part

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        head = self._until(b"\r\n\r\n").decode()
        status = int(head.split(" ", 2)[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])}
        if status == 100:
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
            if not self._fill():
                raise ConnectionError("closed mid-body")
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, headers, body

    def closed(self) -> bool:
        """The server closed the connection (nothing more arrives)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, TimeoutError):
            return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(gateway):
    conns: list[Raw] = []

    def connect() -> Raw:
        conns.append(Raw(gateway.url))
        return conns[-1]
    yield connect
    for c in conns:
        c.close()


def test_a_kept_alive_connection_carries_many_chats_and_answers_come_in_one_piece(gateway, backends, raw):
    gateway.client.set_routes(routes((backends[0], 1)))
    conn = raw()
    for _ in range(3):
        conn.send(post())
        status, headers, body = conn.answer()
        assert status == 200 and json.loads(body)["model"] == MODEL
        assert headers["content-length"] == str(len(body)) and "connection" not in headers
        # One date, the gateway's (the backend's own is not relayed), as HTTP/1.1 servers send.
        assert email.utils.parsedate_to_datetime(headers["date"]).year >= 2024
    assert backends[0].completions == 3


def test_pipelined_requests_are_answered_in_order(gateway, backends, raw):
    gateway.client.set_routes(routes((backends[0], 1)))
    conn = raw()
    conn.send(post() + b"GET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n" + post(b'{"model": "nope"}'))
    assert conn.answer()[0] == 200
    status, _, body = conn.answer()
    assert (status, json.loads(body)["status"]) == (200, "ok")
    status, _, body = conn.answer()
    assert status == 404 and json.loads(body)["error"]["code"] == "model_not_found"


def test_http_1_0_is_answered_then_closed(gateway, backends, raw):
    gateway.client.set_routes(routes((backends[0], 1)))
    conn = raw()
    conn.send(post(version="1.0"))
    status, headers, _ = conn.answer()
    assert status == 200 and headers["connection"] == "close"
    assert conn.closed()


def test_expect_100_continue_is_answered_before_the_body_is_sent(gateway, backends, raw):
    gateway.client.set_routes(routes((backends[0], 1)))
    conn = raw()
    head = post(extra="expect: 100-continue\r\n").removesuffix(CHAT)
    conn.send(head)
    assert conn.answer()[0] == 100
    conn.send(CHAT)
    assert conn.answer()[0] == 200


def test_a_body_declared_too_large_is_refused_before_it_is_sent_and_the_connection_closed(tmp_path, token_file,
                                                                                           backends):
    gw = RunningGateway(tmp_path / "state", token_file, max_body_bytes=1000)
    try:
        gw.client.set_routes(routes((backends[0], 1)))
        conn = Raw(gw.url)
        conn.send(post(b"x" * 5000, extra="expect: 100-continue\r\n").removesuffix(b"x" * 5000))
        status, headers, body = conn.answer()  # no 100 Continue: the answer is final
        assert status == 413 and json.loads(body)["error"]["code"] == "request_too_large"
        assert headers["connection"] == "close" and conn.closed()
        # Chunked (no declared size): refused once it passes the limit.
        conn = Raw(gw.url)
        conn.send(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ntransfer-encoding: chunked\r\n\r\n"
                  + b"".join(b"200\r\n" + b"y" * 512 + b"\r\n" for _ in range(4)))
        assert conn.answer()[0] == 413 and conn.closed()
        assert backends[0].completions == 0
    finally:
        gw.stop()


def test_a_chunked_request_body_reaches_the_backend_whole(gateway, backends, raw):
    gateway.client.set_routes(routes((backends[0], 1)))
    conn = raw()
    pieces = [CHAT[:10], CHAT[10:30], CHAT[30:]]
    conn.send(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ntransfer-encoding: chunked\r\n\r\n")
    for piece in pieces:
        time.sleep(0.05)  # the proxy waits for the rest of the body
        conn.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
    conn.send(b"0\r\n\r\n")
    status, _, body = conn.answer()
    assert status == 200 and json.loads(body)["model"] == MODEL


def test_a_streamed_answer_is_sent_chunked(gateway, backends, raw):
    backends[0].chunk_delay = 0.02  # else the whole stream may have arrived before it is relayed, with a length
    gateway.client.set_routes(routes((backends[0], 1)))
    conn = raw()
    conn.send(post(json.dumps({"model": MODEL, "messages": [], "stream": True}).encode()))
    status, headers, body = conn.answer()
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    assert body.endswith(b"data: [DONE]\n\n") and body.count(b"data: ") > 2
    conn.send(post())  # the connection goes on after the last chunk
    assert conn.answer()[0] == 200


@pytest.mark.parametrize(("request_bytes", "status", "code"), [
    (b"this is not http\r\n\r\n", 400, "invalid_http"),
    (b"GET /healthz HTTP/1.1\r\nhost: gw\r\n" + b"".join(b"x-h%d: v\r\n" % i for i in range(200)) + b"\r\n",
     431, "headers_too_large"),
    (b"GET /healthz HTTP/1.1\r\nhost: gw\r\nx-big: " + b"v" * 70000 + b"\r\n\r\n", 431, "headers_too_large"),
])
def test_what_is_not_http_it_serves_gets_a_clear_error_and_a_closed_connection(gateway, raw, request_bytes,
                                                                                status, code):
    conn = raw()
    conn.send(request_bytes)
    got, headers, body = conn.answer()
    assert (got, json.loads(body)["error"]["code"]) == (status, code) and "date" in headers
    assert headers["connection"] == "close" and conn.closed()
    assert httpx.get(gateway.url + "/healthz").status_code == 200  # and the server goes on


def test_an_upgrade_is_answered_as_plain_http_then_closed(gateway, raw):
    conn = raw()
    conn.send(b"GET /healthz HTTP/1.1\r\nhost: gw\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n"
              b"\x81\x05hello")  # a WebSocket frame, as a client that assumed the switch would send
    status, headers, body = conn.answer()
    assert (status, json.loads(body)["status"], headers["connection"]) == (200, "ok", "close")
    assert conn.closed()


def test_head_gets_headers_only(gateway, raw):
    conn = raw()
    conn.send(b"HEAD /healthz HTTP/1.1\r\nhost: gw\r\n\r\n")
    conn.send(b"GET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n")
    head = conn._until(b"\r\n\r\n").decode()  # the GET's length, and no body follows
    assert head.startswith("HTTP/1.1 200") and "content-length: 29" in head
    status, _, body = conn.answer()
    assert status == 200 and len(body) == 29


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(tmp_path, token_file):
    gw = RunningGateway(tmp_path / "state", token_file, bounds=Bounds(keep_alive_timeout=1, body_timeout=1))
    try:
        conn = Raw(gw.url)
        conn.send(b"GET /healthz HTTP/1.1\r\nhost: gw\r\n\r\n")
        assert conn.answer()[0] == 200
        stalled = Raw(gw.url)  # a body that stops coming holds nothing for longer either
        stalled.send(post(b"x" * 100).removesuffix(b"x" * 90))
        conn.sock.settimeout(5)
        stalled.sock.settimeout(5)
        started = time.monotonic()
        assert conn.closed()
        status, headers, body = stalled.answer()
        assert (status, json.loads(body)["error"]["code"], headers["connection"]) == (408, "request_timeout", "close")
        assert stalled.closed()
        assert time.monotonic() - started < 3
    finally:
        gw.stop()


def streaming(tmp_path, token_file, backend, chunk_delay: float) -> tuple[RunningGateway, Raw]:
    """A gateway of its own (the test stops it) and a connection whose streamed chat is under way."""
    gw = RunningGateway(tmp_path / "state", token_file)
    backend.chunk_delay = chunk_delay
    gw.client.set_routes(routes((backend, 1)))
    conn = Raw(gw.url)
    conn.send(post(json.dumps({"model": MODEL, "messages": [], "stream": True}).encode()))
    wait_until(lambda: backend.completions == 1)
    return gw, conn


def test_stopping_lets_the_answer_in_flight_finish_and_refuses_new_connections(tmp_path, token_file, backends):
    gw, conn = streaming(tmp_path, token_file, backends[0], 0.2)
    idle = Raw(gw.url)
    stopper = threading.Thread(target=gw.stop)
    stopper.start()
    try:
        assert idle.closed()  # idle connections are closed at once
        status, headers, body = conn.answer()  # the stream in flight runs to its end
        assert status == 200 and body.endswith(b"data: [DONE]\n\n")
        assert conn.closed()
        stopper.join(10)
        assert not stopper.is_alive()
        with pytest.raises(OSError):
            Raw(gw.url)
    finally:
        conn.close()
        idle.close()


def test_a_second_stop_closes_what_is_still_in_flight(tmp_path, token_file, backends):
    gw, conn = streaming(tmp_path, token_file, backends[0], 1.0)
    server = gw.served.server
    server.should_exit = True
    time.sleep(0.3)
    server.force_exit = True  # as a second Ctrl-C
    gw.served.thread.join(5)
    assert not gw.served.thread.is_alive()
    gw.client.close()
    gw.served.sock.close()
    with pytest.raises(ConnectionError):
        conn.answer()

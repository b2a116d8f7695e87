"""The plane's HTTP clients share one SSL context (wingsmith/adapters/http_tls.py): building a client costs
nothing on top, and certificates are checked as httpx checks them itself."""

from __future__ import annotations

import http.server
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sim.kube.tls import make_server_tls
from wingsmith.adapters.http_tls import default_tls


def test_one_context_per_trust_env_setting():
    assert default_tls() is default_tls()
    assert default_tls(trust_env=False) is default_tls(trust_env=False)
    assert default_tls(trust_env=False) is not default_tls()
    assert default_tls().verify_mode == ssl.CERT_REQUIRED and default_tls().check_hostname


def _cpu_to_build(clients: int, **kwargs) -> float:
    started = time.process_time()
    for _ in range(clients):
        httpx.Client(trust_env=False, **kwargs).close()
    return time.process_time() - started


def test_a_client_on_the_shared_context_costs_a_fraction_of_one_that_reads_the_ca_bundle():
    default_tls(trust_env=False)  # made once, before the count
    # CPU time, not the wall clock: beside other tests the comparison still holds.
    assert _cpu_to_build(40, verify=default_tls(trust_env=False)) < _cpu_to_build(10) / 4


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server whose certificate comes from a CA of its own, and that CA's file."""
    tls = make_server_tls(tmp_path, "127.0.0.1")

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the handler's API
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.cert_file, tls.key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/", tls.ca_file
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_certificates_are_still_checked(tls_server):
    url, ca_file = tls_server
    for trust_env in (True, False):
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(url, verify=default_tls(trust_env=trust_env), trust_env=trust_env, timeout=5)
    # The same server is reachable with its CA: what failed above was the check, nothing else.
    assert httpx.get(url, verify=ssl.create_default_context(cafile=ca_file), timeout=5).text == "ok"

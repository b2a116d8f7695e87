"""The TLS settings of the plane's own HTTP calls, made once per process.

httpx makes a new SSL context for every client it builds, and making one reads the whole CA bundle
(certifi's, about 140 certificates): 25 ms of CPU on this repository's 2-core machine, whether the call then
goes to an https:// URL or a plain http:// one. The plane builds clients per call (an endpoint's observe
every few seconds, each gateway counter read, the CLI's every request while it waits), so that was most of
such a call's CPU: in a profile of the workload, endpoint and upgrade tests, 8.9 % of the test process went
to building SSL contexts (1.0 % after). A client given this context as `verify` skips it and checks
certificates exactly as before: the same CA bundle, from the same place, as httpx would have chosen
(`trust_env`: `SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured only where the client would have honoured them).
An SSLContext is safe to share between clients and threads.

Clients that verify against a CA of their own (a member cluster's, a secured Temporal's) keep making theirs.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def default_tls(trust_env: bool = True) -> ssl.SSLContext:
    """What httpx's `verify=True` means, made once: pass it as `verify=` (with the client's own `trust_env`).
    httpx's own function (public since before 0.27, the floor), so the choice of CA bundle stays httpx's."""
    return httpx.create_ssl_context(trust_env=trust_env)

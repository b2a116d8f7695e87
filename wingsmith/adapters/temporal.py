"""One way to connect to Temporal for every process: pydantic payloads, and Temporal's own client
environment configuration (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*,
profiles in temporal.toml via TEMPORAL_CONFIG_FILE and TEMPORAL_PROFILE), so TLS and API keys never
pass through Wingsmith's settings. With a payload key configured, every payload is encrypted
(wingsmith/adapters/codec.py), for workers, API and CLI alike.

A connection that cannot be made raises `TemporalConnectError`: one line naming the address and the
cause in the operator's terms (which certificate, which variable), never the SDK's Rust debug text,
and it says whether retrying can help (a refused certificate never starts working by itself)."""

from __future__ import annotations

import asyncio
import functools
import os
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import HeaderCodecBehavior
from temporalio.envconfig import ClientConfigProfile, DataSource
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from wingsmith.adapters.codec import data_converter
from wingsmith.adapters.payloads import PayloadBudgetCodec
from wingsmith.adapters.startup import StartFailure, exit_on_start_failure
from wingsmith.adapters.tracing import temporal_interceptors
from wingsmith.domain.config import Settings

# A server that accepts the TCP connection and then says nothing (a firewall, a wrong port behind a
# load balancer) must not hang a process's start: the SDK's own default has no bound.
CONNECT_TIMEOUT = timedelta(seconds=10)


class TemporalConnectError(StartFailure):
    def __init__(self, address: str, cause: str, *, misconfigured: bool) -> None:
        super().__init__(f"cannot connect to Temporal at {address}: {cause}", misconfigured=misconfigured)
        self.address = address


@dataclass(frozen=True)
class _Target:
    address: str
    namespace: str
    profile: ClientConfigProfile


def client_profile(address_for_errors: str = "the configured address") -> ClientConfigProfile:
    """Temporal's client configuration for this process (file profile, then TEMPORAL_* overrides)."""
    config_file = os.environ.get("TEMPORAL_CONFIG_FILE")
    # The SDK treats a missing file as an empty one: a Secret that failed to mount would silently
    # send the plane, without TLS, to 127.0.0.1:7233.
    if config_file and not Path(config_file).is_file():
        raise TemporalConnectError(address_for_errors, f"TEMPORAL_CONFIG_FILE names {config_file}, which is not a "
                                   "readable file", misconfigured=True)
    try:
        return ClientConfigProfile.load()
    except Exception as exc:  # noqa: BLE001 - the SDK raises its own ConfigError; any failure here is config
        raise TemporalConnectError(address_for_errors, f"the Temporal client configuration cannot be loaded "
                                   f"({_first_line(exc)})", misconfigured=True) from None


def configured_address(settings: Settings) -> str | None:
    """The Temporal this process is pointed at, if any (TEMPORAL_ADDRESS or a temporal.toml profile)."""
    return settings.temporal_address or client_profile().address or None


def client_namespace(settings: Settings) -> str:
    """A namespace set for Wingsmith (WINGSMITH_TEMPORAL_NAMESPACE, TEMPORAL_NAMESPACE, or in code)
    wins; else the profile's; else `default`."""
    if "temporal_namespace" in settings.model_fields_set:
        return settings.temporal_namespace
    return _namespace(settings, _profile_namespace(os.environ.get("TEMPORAL_CONFIG_FILE"),
                                                   os.environ.get("TEMPORAL_PROFILE")))


@functools.lru_cache(maxsize=8)
def _profile_namespace(config_file: str | None, profile: str | None) -> str | None:
    """Every workflow link of every answer asks (70 µs a load); the file is read once per process."""
    return client_profile().namespace


def _namespace(settings: Settings, profile_namespace: str | None) -> str:
    if "temporal_namespace" in settings.model_fields_set:
        return settings.temporal_namespace
    return profile_namespace or settings.temporal_namespace


def _target(settings: Settings, address: str | None) -> _Target:
    profile = client_profile(address or settings.temporal_address or "the configured address")
    chosen = address or settings.temporal_address or profile.address or f"127.0.0.1:{settings.temporal_port}"
    return _Target(chosen, _namespace(settings, profile.namespace), profile)


def _tls_config(target: _Target) -> bool | TLSConfig | None:
    """The SDK reads certificate files deep inside; read them here so a missing one is named."""
    tls = target.profile.tls
    if tls is None:
        return True if target.profile.api_key is not None else None  # an API key implies TLS, as in the SDK
    if tls.disabled:
        return False
    if (tls.client_cert is None) != (tls.client_private_key is None):
        raise TemporalConnectError(target.address, "a client certificate needs its key: set both "
                                   "TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (or *_DATA)",
                                   misconfigured=True)

    def read(source: DataSource | None, what: str, variable: str) -> DataSource | None:
        if not isinstance(source, Path):
            return source
        try:
            return source.read_bytes()
        except OSError as exc:
            raise TemporalConnectError(target.address, f"cannot read the {what} {source} ({variable} or the "
                                       f"profile's tls section): {exc.strerror}", misconfigured=True) from None
    return replace(
        tls, server_root_ca_cert=read(tls.server_root_ca_cert, "server CA certificate",
                                      "TEMPORAL_TLS_SERVER_CA_CERT_PATH"),
        client_cert=read(tls.client_cert, "client certificate", "TEMPORAL_TLS_CLIENT_CERT_PATH"),
        client_private_key=read(tls.client_private_key, "client key", "TEMPORAL_TLS_CLIENT_KEY_PATH"),
    ).to_connect_tls_config()


async def connect(settings: Settings, *, address: str | None = None, wait_seconds: float = 30,
                  runtime: Runtime | None = None) -> Client:
    """Connect, waiting up to `wait_seconds` for a server that is starting: a fresh dev server
    listens before its frontend reports healthy. Every client traces (wingsmith/adapters/tracing.py), and so
    does every worker built on one; `runtime` carries the worker's metrics exporter."""
    target = _target(settings, address)
    tls = _tls_config(target)
    kwargs: dict[str, Any] = {"target_host": target.address, "namespace": target.namespace,
                              "api_key": target.profile.api_key, "tls": tls,
                              "rpc_metadata": dict(target.profile.grpc_meta), "connect_timeout": CONNECT_TIMEOUT}
    converter = data_converter(settings)
    # The tracing interceptor's header (a trace context) is a payload too: encrypted like the rest.
    # (the payload budget alone changes no bytes: headers skip the codec then, as before it existed)
    encrypted = not isinstance(converter.payload_codec, PayloadBudgetCodec)
    headers = HeaderCodecBehavior.CODEC if encrypted else HeaderCodecBehavior.NO_CODEC
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    while True:
        try:
            # The SDK's connect_timeout bounds the TCP and TLS handshakes; this bounds the first call too.
            return await asyncio.wait_for(
                Client.connect(**kwargs, data_converter=converter, interceptors=temporal_interceptors(),
                               runtime=runtime, header_codec_behavior=headers),
                timeout=CONNECT_TIMEOUT.total_seconds() * 2)
        except TimeoutError:
            raise TemporalConnectError(target.address, f"no answer within {CONNECT_TIMEOUT.total_seconds() * 2:.0f} s",
                                       misconfigured=False) from None
        except (RuntimeError, RPCError, ValueError) as exc:
            if "not healthy" in str(exc) and loop.time() < deadline:
                await asyncio.sleep(0.2)
                continue
            raise explain(target, tls, exc) from None


# (what the SDK's error says, whether retrying cannot help, the cause in the operator's words)
_CAUSES: tuple[tuple[tuple[str, ...], bool, str], ...] = (
    (("CertificateRequired",), True,
     "the server requires a client certificate{none}"),
    (("UnknownCA", "BadCertificate", "bad certificate", "CertificateUnknown", "AccessDenied"), True,
     "the server refused the client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH): it is not signed by a CA the "
     "server trusts"),
    (("CertificateExpired", "CertificateRevoked"), True, "the server refused the client certificate: expired or "
     "revoked (TEMPORAL_TLS_CLIENT_CERT_PATH)"),
    (("UnknownIssuer", "BadSignature"), True, "the server's certificate is not signed by a CA this client trusts "
     "(TEMPORAL_TLS_SERVER_CA_CERT_PATH)"),
    (("NotValidForName",), True, "the server's certificate is not valid for the name this client checks "
     "(TEMPORAL_TLS_SERVER_NAME, else the address's host)"),
    (("Expired",), True, "the server's certificate has expired"),
    (("PrivateKeyParseError", "invalid key", "InvalidCertificate(BadEncoding)", "no certificates found"), True,
     "the client certificate or key is not PEM the client can read (TEMPORAL_TLS_CLIENT_CERT_PATH, "
     "TEMPORAL_TLS_CLIENT_KEY_PATH)"),
    (("Must have both client cert and private key",), True,
     "a client certificate needs its key: set both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"),
    (("H2NotNegotiated",), True, "the TLS endpoint does not offer HTTP/2 (ALPN h2), which gRPC needs: a TLS proxy "
     "in front of Temporal must negotiate h2"),
    (("InvalidContentType", "CorruptMessage", "wrong version number"), True,
     "the server does not speak TLS there: unset TEMPORAL_TLS (and the TEMPORAL_TLS_* files) or use its TLS port"),
    (("ConnectionRefused", "Connection refused"), False, "nothing listens there (connection refused)"),
    (("dns error", "failed to lookup address"), False, "the host name does not resolve"),
    (("timed out", "Timeout", "deadline has elapsed"), False, "no answer in time"),
)
_CLOSED = ("broken pipe", "BrokenPipe", "ConnectionReset", "connection closed", "UnexpectedEof", "unexpected EOF")


def explain(target: _Target, tls: bool | TLSConfig | None, exc: BaseException) -> TemporalConnectError:
    text = str(exc)
    if isinstance(exc, RPCError) and exc.status in (RPCStatusCode.UNAUTHENTICATED, RPCStatusCode.PERMISSION_DENIED):
        return TemporalConnectError(target.address, "the server refused the credentials (TEMPORAL_API_KEY, or the "
                                    f"client certificate): {_scrub(exc.message, target)}", misconfigured=True)
    with_cert = isinstance(tls, TLSConfig) and tls.client_cert is not None
    none = "" if with_cert else ", and none is configured (TEMPORAL_TLS_CLIENT_CERT_PATH and _KEY_PATH)"
    for needles, misconfigured, cause in _CAUSES:
        if any(n in text for n in needles):
            return TemporalConnectError(target.address, cause.format(none=none), misconfigured=misconfigured)
    if any(n in text for n in _CLOSED):
        # TLS 1.3 servers check the client certificate after the client thinks the handshake is done: the
        # refusal may arrive as a closed connection on the first call instead of the server's alert.
        if tls and not with_cert:
            return TemporalConnectError(target.address, "the server closed the TLS connection: it probably requires "
                                        "a client certificate" + none, misconfigured=True)
        if with_cert:
            return TemporalConnectError(target.address, "the server closed the TLS connection: it probably refused "
                                        "the client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH)", misconfigured=True)
        if not tls:
            return TemporalConnectError(target.address, "the server closed the connection: if it expects TLS, set "
                                        "TEMPORAL_TLS=true and the TEMPORAL_TLS_* files", misconfigured=False)
    return TemporalConnectError(target.address, _scrub(_first_line(exc), target), misconfigured=False)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


def _scrub(text: str, target: _Target) -> str:
    """No credential the configuration holds may reach a log line through an echoed error."""
    key = target.profile.api_key
    return text.replace(key, "<api key>") if key else text


def workflow_ui_url(settings: Settings, workflow_id: str) -> str:
    from urllib.parse import quote
    return (f"{settings.temporal_ui_url.rstrip('/')}/namespaces/{client_namespace(settings)}"
            f"/workflows/{quote(workflow_id, safe='')}")


def check_before_start(settings: Settings, process: str, *, fatal_when_unreachable: bool) -> None:
    """Connect once before serving: a refused certificate or key never starts working, so the process
    ends in one line (wingsmith/adapters/startup.py) instead of serving a plane whose every call fails. A server
    that is only unreachable may come back: with `fatal_when_unreachable=False` the process starts and
    says so where it can (the API's /readyz)."""
    try:
        if configured_address(settings):
            asyncio.run(connect(settings, wait_seconds=0))
    except StartFailure as failure:
        if failure.misconfigured or fatal_when_unreachable:
            exit_on_start_failure(process, failure)

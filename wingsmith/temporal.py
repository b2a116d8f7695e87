"""One way to connect to Temporal for every process: pydantic payloads, and Temporal's own client
environment configuration (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*,
profiles in temporal.toml), so TLS and API keys never pass through Wingsmith's settings. With a
payload key configured, every payload is encrypted (wingsmith/codec.py), for workers, API and CLI alike."""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.common import HeaderCodecBehavior
from temporalio.envconfig import ClientConfigProfile
from temporalio.runtime import Runtime

from wingsmith.codec import data_converter
from wingsmith.config import Settings
from wingsmith.payloads import PayloadBudgetCodec
from wingsmith.tracing import temporal_interceptors


async def connect(settings: Settings, *, address: str | None = None, wait_seconds: float = 30,
                  runtime: Runtime | None = None) -> Client:
    """Connect, waiting up to `wait_seconds` for a server that is starting: a fresh dev server
    listens before its frontend reports healthy. Every client traces (wingsmith/tracing.py), and so
    does every worker built on one; `runtime` carries the worker's metrics exporter."""
    profile = ClientConfigProfile.load()
    kwargs = profile.to_client_connect_config()
    kwargs["target_host"] = address or settings.temporal_address or kwargs.get("target_host") \
        or f"127.0.0.1:{settings.temporal_port}"
    kwargs.setdefault("namespace", settings.temporal_namespace)
    converter = data_converter(settings)
    # The tracing interceptor's header (a trace context) is a payload too: encrypted like the rest.
    # (the payload budget alone changes no bytes: headers skip the codec then, as before it existed)
    encrypted = not isinstance(converter.payload_codec, PayloadBudgetCodec)
    headers = HeaderCodecBehavior.CODEC if encrypted else HeaderCodecBehavior.NO_CODEC
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while True:
        try:
            return await Client.connect(**kwargs, data_converter=converter, interceptors=temporal_interceptors(),
                                        runtime=runtime, header_codec_behavior=headers)
        except RuntimeError as exc:
            if "not healthy" not in str(exc) or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


def workflow_ui_url(settings: Settings, workflow_id: str) -> str:
    from urllib.parse import quote
    return (f"{settings.temporal_ui_url.rstrip('/')}/namespaces/{settings.temporal_namespace}"
            f"/workflows/{quote(workflow_id, safe='')}")

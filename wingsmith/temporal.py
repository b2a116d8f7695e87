"""One way to connect to Temporal for every process: pydantic payloads, and Temporal's own client
environment configuration (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*,
profiles in temporal.toml), so TLS and API keys never pass through Wingsmith's settings."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile

from wingsmith.config import Settings


async def connect(settings: Settings, *, address: str | None = None) -> Client:
    profile = ClientConfigProfile.load()
    kwargs = profile.to_client_connect_config()
    kwargs["target_host"] = address or settings.temporal_address or kwargs.get("target_host") \
        or f"127.0.0.1:{settings.temporal_port}"
    kwargs.setdefault("namespace", settings.temporal_namespace)
    return await Client.connect(**kwargs, data_converter=pydantic_data_converter)


def workflow_ui_url(settings: Settings, workflow_id: str) -> str:
    from urllib.parse import quote
    return (f"{settings.temporal_ui_url.rstrip('/')}/namespaces/{settings.temporal_namespace}"
            f"/workflows/{quote(workflow_id, safe='')}")

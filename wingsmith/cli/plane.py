"""The plane a CLI command talks to. `wingsmith up` records its addresses in
`$WINGSMITH_HOME/plane.json`; a command uses them unless a flag or an explicit setting says otherwise:

    API       --api, else WINGSMITH_API_URL, else plane.json, else http://<api_host>:<api_port>
    gateway   --gateway, else WINGSMITH_GATEWAY_URL, else plane.json, else http://127.0.0.1:<gateway_port>
    Hub       WINGSMITH_HF_ENDPOINT, else plane.json (the offline Hub of an --offline-hub plane), else the real Hub

So a CLI never silently talks to some other plane on the default port, and `wingsmith resolve` asks
the same Hub as the plane it belongs to."""

from __future__ import annotations

import json
from typing import Any

from wingsmith.domain.config import Settings, get_settings


def recorded(settings: Settings | None = None) -> dict[str, Any]:
    """What `wingsmith up` wrote for this home; empty when no plane was started here."""
    try:
        data = json.loads((settings or get_settings()).plane_file.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _explicit(settings: Settings, field: str) -> bool:
    return field in settings.model_fields_set


def api_url(flag: str | None = None, settings: Settings | None = None) -> str:
    s = settings or get_settings()
    url = flag or (s.api_url if _explicit(s, "api_url") else None) or recorded(s).get("api_url")
    return (url or f"http://{s.api_host}:{s.api_port}").rstrip("/")


def gateway_url(flag: str | None = None, settings: Settings | None = None) -> str:
    s = settings or get_settings()
    url = flag or (s.gateway_url if _explicit(s, "gateway_url") else None) or recorded(s).get("gateway_url")
    return (url or s.gateway_url).rstrip("/")


def hub_endpoint(settings: Settings | None = None) -> str:
    s = settings or get_settings()
    if _explicit(s, "hf_endpoint"):
        return s.hf_endpoint
    return recorded(s).get("hub_endpoint") or s.hf_endpoint

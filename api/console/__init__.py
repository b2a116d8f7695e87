"""The review console: server-rendered pages under /console, signed in with an API token.

Each page module in this package exposes `router` (built with `ConsoleRoute`, so errors become pages
and a missing sign-in becomes a redirect) and is included here by name. To add a page family
(workloads, endpoints), write `api/console/<name>.py` with its templates and add the name below.
"""

from __future__ import annotations

import importlib

from fastapi import APIRouter

PAGE_MODULES = ["session", "artifacts", "models"]

router = APIRouter(include_in_schema=False)
for _name in PAGE_MODULES:
    router.include_router(importlib.import_module(f"api.console.{_name}").router, prefix="/console")

__all__ = ["router", "PAGE_MODULES"]

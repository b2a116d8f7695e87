"""The review console: server-rendered pages under /console, signed in with an API token.

Each page module in this package exposes `router` (built with `ConsoleRoute`, so errors become pages
and a missing sign-in becomes a redirect) and is included here by name. To add a page family
(workloads, endpoints), follow `artifacts.py`:

1. `console/<name>.py`: `router = APIRouter(route_class=ConsoleRoute)`; take the person from
   `ConsoleViewer` / `ConsoleOperator` / `ConsoleApprover` (session.py); read and change through the
   services the REST routes call (`api/services/<name>.py`; never a route: tests/test_layers.py), so both say
   the same thing; `answer_fields` (api/responses.py) gives a service's answer as the REST API's keys.
2. Forms that change something are POSTs: `form = await read_form(request)`, then `check_csrf(request,
   form)`, and a hidden `<input name="csrf" value="{{ csrf }}">` in the template. Raise `ApiError` (or
   let the service raise it): the page shows its message. Redirect (303) after success.
3. Templates extend `base.html` (add a link to its nav); shared pieces are macros in `_evidence.html`.
4. Add the module name to `PAGE_MODULES` below, and its tests under tests/console/.
"""

from __future__ import annotations

import importlib

from fastapi import APIRouter

# The create pages come before their families: `/workloads/new` must not be read as a workload called "new".
PAGE_MODULES = ["session", "new_artifact", "artifacts", "models", "new_workload", "workloads", "new_endpoint",
                "endpoints", "clusters", "run_locally"]

router = APIRouter(include_in_schema=False)
for _name in PAGE_MODULES:
    router.include_router(importlib.import_module(f"console.{_name}").router, prefix="/console")
# Its icon, at /console/static/ and at the site's root, where browsers ask for /favicon.ico.
router.include_router(importlib.import_module("console.favicon").router)

__all__ = ["router", "PAGE_MODULES"]

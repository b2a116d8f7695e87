"""The plane's use cases, one module per family (artifacts, proposals, clusters, planning, workloads,
endpoints, watches), called by the REST routes and the console alike; the CLI reaches them through the REST
routes. So a refusal reads the same everywhere, and each route is thin: parse, authorise, call, shape.

A service function takes plain inputs: the principal, the registry pool, the Temporal client, the settings
and the per-process objects it needs (the resolver's cache, the live inventory reads), never a request. It
returns typed results (api/responses.py) or raises `ApiError`, which api/errors.py answers in the one
error shape (the console shows its message on the page).
"""

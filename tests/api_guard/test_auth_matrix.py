"""Who may call what: every route of the real app, called with no token, a wrong token and each role's
token, against the table below, which is the spec. A route without a row fails the test, so a new
route cannot ship without someone deciding who may call it.

Roles (api/auth.py): admin ⊃ approver and operator ⊃ viewer, and an approver is not an operator nor
the other way round: the person who approves a draft is not meant to be the one who rolls it out.
- viewer reads everything, and may ask for a placement dry run (it changes nothing).
- operator registers artifacts and manages workloads and endpoints.
- approver reviews drafts.
- admin does all of it, and alone manages the cluster registry (a cluster carries a kubeconfig
  reference, which is more than rolling out onto clusters already trusted).

"Allowed" means the request got past auth: neither 401 nor 403 (a 404 or 422 for a dummy id or body
is the handler answering) and never a 5xx. Console pages sign in with a cookie, so a missing or
wrong token there is a redirect to the login page rather than a 401.

Roles say what a principal may do; teams say to which objects. Workloads, endpoints and watches are
their team's: TEAM_OWNED lists every route that reads or changes them, and tests/teams calls each with
another team's token on a real object (404, as if absent; lists leave it out). Artifacts, reviews and
clusters are the organisation's.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from fastapi.routing import iter_route_contexts

from tests.api_guard.conftest import ROLE_TOKENS, TOKENS, WRONG_TOKEN, as_
from tests.support import running_worker, wait_until
from wingsmith.adapters.starter import artifact_handle

PUBLIC = "public"
GATEWAY = "the gateway admin token"

# (method, path) → the least role that may call it. The spec of the API's access control.
ACCESS: dict[tuple[str, str], str] = {
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/docs/oauth2-redirect"): PUBLIC,
    ("GET", "/redoc"): PUBLIC,
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/version"): PUBLIC,  # the release and the build, as `wingsmith --version` says them
    ("GET", "/metrics"): PUBLIC,  # Prometheus scrapes carry no token; counts by route template only
    ("GET", "/v1/recipes"): "viewer",
    ("GET", "/v1/recipes/{org}/{name}"): "viewer",
    ("GET", "/v1/artifacts/resolve"): "viewer",
    ("POST", "/v1/artifacts"): "operator",
    ("GET", "/v1/artifacts"): "viewer",
    ("GET", "/v1/artifacts/{org}/{name_at_sha}"): "viewer",
    ("POST", "/v1/artifacts/{org}/{name_at_sha}/review"): "approver",
    ("POST", "/v1/artifacts/{org}/{name_at_sha}/drafts/{version}/performance"): "operator",
    ("POST", "/v1/clusters"): "admin",
    ("GET", "/v1/clusters"): "viewer",
    ("GET", "/v1/clusters/{name}"): "viewer",
    ("PATCH", "/v1/clusters/{name}"): "admin",
    ("DELETE", "/v1/clusters/{name}"): "admin",
    ("POST", "/v1/clusters/{name}/cordon"): "admin",
    ("POST", "/v1/clusters/{name}/uncordon"): "admin",
    ("POST", "/v1/clusters/{name}/check"): "admin",  # records whether the cluster may take replicas
    ("POST", "/v1/placements/dry-run"): "viewer",
    ("POST", "/v1/workloads"): "operator",
    ("GET", "/v1/workloads"): "viewer",
    ("GET", "/v1/workloads/{workload_id}"): "viewer",
    ("PATCH", "/v1/workloads/{workload_id}"): "operator",
    ("DELETE", "/v1/workloads/{workload_id}"): "operator",
    ("POST", "/v1/workloads/{workload_id}/upgrade"): "operator",
    ("POST", "/v1/workloads/{workload_id}/upgrade/pause"): "operator",
    ("POST", "/v1/workloads/{workload_id}/upgrade/resume"): "operator",
    ("POST", "/v1/workloads/{workload_id}/upgrade/abort"): "operator",
    ("PATCH", "/v1/workloads/{workload_id}/follow"): "operator",
    ("GET", "/v1/workloads/{workload_id}/autoscaling"): "viewer",
    # Lifting the team's budget for one scale: an approver's, not the operators' whose workload scales.
    ("POST", "/v1/workloads/{workload_id}/autoscaling/approve"): "approver",
    ("GET", "/v1/workloads/plans/{ticket}"): "operator",
    ("POST", "/v1/endpoints"): "operator",
    ("GET", "/v1/endpoints"): "viewer",
    ("GET", "/v1/endpoints/{name}"): "viewer",
    ("PATCH", "/v1/endpoints/{name}"): "operator",
    ("GET", "/v1/watches"): "viewer",
    ("POST", "/v1/watches/{org}/{name_at_branch}/{action}"): "operator",
    ("DELETE", "/v1/endpoints/{name}"): "operator",
    # Team quotas: an admin sets and removes them; a team reads its own (another team's answers 404, as an
    # absent one would), an admin every team's.
    ("PUT", "/v1/teams/{team}/quota"): "admin",
    ("GET", "/v1/teams/{team}/quota"): "viewer",
    ("DELETE", "/v1/teams/{team}/quota"): "admin",
    ("GET", "/console/static/console.css"): PUBLIC,
    ("GET", "/console/static/console.js"): PUBLIC,
    ("GET", "/console/static/favicon.svg"): PUBLIC,  # the console's icon (console/favicon.py)
    ("GET", "/favicon.ico"): PUBLIC,  # the same icon where browsers ask for it by habit
    ("GET", "/console/artifacts/new"): "operator",
    ("POST", "/console/artifacts/new"): "operator",
    ("GET", "/console/workloads/new"): "operator",
    ("GET", "/console/workloads/new/check"): "operator",
    ("POST", "/console/workloads/new"): "operator",
    ("GET", "/console/endpoints/new"): "operator",
    ("POST", "/console/endpoints/new"): "operator",
    ("GET", "/console/login"): PUBLIC,
    ("POST", "/console/login"): PUBLIC,
    ("POST", "/console/logout"): PUBLIC,
    ("GET", "/console"): "viewer",
    ("GET", "/console/artifacts/{org}/{name_at_sha}"): "viewer",
    ("POST", "/console/artifacts/{org}/{name_at_sha}/review"): "approver",
    ("POST", "/console/artifacts/{org}/{name_at_sha}/performance"): "operator",
    ("GET", "/console/models"): PUBLIC,
    ("GET", "/console/models/{org}/{name}"): PUBLIC,
    ("GET", "/console/workloads"): "viewer",
    ("GET", "/console/workloads/{workload_id}"): "viewer",
    ("POST", "/console/workloads/{workload_id}/scale"): "operator",
    ("POST", "/console/workloads/{workload_id}/delete"): "operator",
    ("POST", "/console/workloads/{workload_id}/upgrade/{action}"): "operator",
    ("POST", "/console/workloads/{workload_id}/autoscaling/approve"): "approver",
    ("GET", "/console/endpoints"): "viewer",
    ("GET", "/console/endpoints/{name}"): "viewer",
    ("POST", "/console/endpoints/{name}/workloads"): "operator",
    ("GET", "/console/clusters"): "viewer",
    ("GET", "/console/clusters/{name}"): "viewer",
    ("POST", "/console/clusters/{name}/check"): "admin",
    ("GET", "/console/run-locally"): PUBLIC,
    # The Temporal UI's remote codec: decoding shows every team's payloads (admin); encoding makes
    # payloads that workers act on (operator); the CORS preflight carries no token by design.
    ("POST", "/codec/decode"): "admin",
    ("POST", "/codec/encode"): "operator",
    ("OPTIONS", "/codec/{operation}"): PUBLIC,
    # The published route table, for gateway replicas: their admin token only, no person's.
    ("GET", "/v1/gateway/routes"): GATEWAY,
}

# Routes on team-owned objects (workloads, endpoints, watches): scoped to the caller's team, admins
# excepted. Every route whose path names one of them must be here (test_every_team_route_is_listed).
TEAM_OWNED: set[tuple[str, str]] = {
    (method, path) for method, path in ACCESS
    if any(path.startswith(prefix) for prefix in ("/v1/workloads", "/v1/endpoints", "/v1/watches",
                                                   "/console/workloads", "/console/endpoints"))
    # Creating a workload or endpoint is the creator's team's by construction; the new-object forms
    # list only the caller's team's workloads (tests/teams checks that too).
    # A traffic plan's status is no team's object: its ticket is the request itself, checked again on each
    # read, and answers what a dry run of that request answers to any operator (wingsmith/adapters/traffic_plans.py).
    and not path.startswith("/v1/workloads/plans/")
}

# Which callers' roles satisfy a required role: written out here, not derived from api/auth.py, so
# a change to the nesting there shows up as a failure here.
SATISFIES = {
    "viewer": {"viewer", "operator", "approver", "admin"},
    "operator": {"operator", "admin"},
    "approver": {"approver", "admin"},
    "admin": {"admin"},
}

# Dummy path parameters: well-formed, naming nothing that exists.
PARAMS = {"operation": "decode", "org": "acme", "name": "nothing-here", "name_at_sha": "nothing@" + "0" * 40,
          "name_at_branch": "nothing@main", "action": "trigger", "workload_id": "wl-nothing", "version": "1",
          "ticket": "not-a-ticket", "team": "nothing-here"}
QUERY = {"/v1/artifacts/resolve": {"source": "hf:nobody/nothing-here"}}
# Bodies that pass validation where that is cheap, so "allowed" reaches the handler's own answer.
BODIES = {
    ("POST", "/v1/artifacts"): {"source": "hf:nobody/nothing-here"},
    ("POST", "/v1/artifacts/{org}/{name_at_sha}/review"): {"decision": "approve", "draft_version": 1},
    ("POST", "/v1/clusters"): {"name": "guard-matrix", "kubeconfig": "env:KUBECONFIG_GUARD"},
    ("PATCH", "/v1/clusters/{name}"): {"cost_per_gpu_hour": 1.0},
    ("PATCH", "/v1/workloads/{workload_id}"): {"replicas": 2},
    ("POST", "/v1/workloads/{workload_id}/upgrade"): {"artifact_id": "acme/nothing@" + "0" * 40},
    ("PATCH", "/v1/workloads/{workload_id}/follow"): {"follow": "auto"},
    ("POST", "/v1/workloads/{workload_id}/autoscaling/approve"): {"tick": 1, "approve": True},
    ("POST", "/v1/endpoints"): {"name": "nothing-here", "workloads": ["wl-nothing"]},
    ("PATCH", "/v1/endpoints/{name}"): {"workloads": ["wl-nothing"]},
    ("PUT", "/v1/teams/{team}/quota"): {"gpus": {"h200": 8, "*": 16}, "budget_per_hour": 100},
    ("POST", "/codec/decode"): {"payloads": []},
    ("POST", "/codec/encode"): {"payloads": []},
}
# The codec's preflight answers the Temporal UI's origin only (a CORS rule, not auth).
EXTRA_HEADERS = {("OPTIONS", "/codec/{operation}"): {"Origin": "http://localhost:8233",
                                                     "Access-Control-Request-Method": "POST"}}
CONSOLE_FORMS = {
    ("POST", "/console/artifacts/{org}/{name_at_sha}/review"): {"decision": "approve", "draft_version": "1"},
    ("POST", "/console/artifacts/{org}/{name_at_sha}/performance"): {"draft_version": "1"},
    ("POST", "/console/workloads/{workload_id}/scale"): {"replicas": "2"},
    ("POST", "/console/workloads/{workload_id}/autoscaling/approve"): {"tick": "1", "decision": "approve"},
    ("POST", "/console/artifacts/new"): {"source": "not a model"},
    ("POST", "/console/workloads/new"): {"artifact_id": "acme/nothing@" + "0" * 40, "hardware": "h200"},
    ("POST", "/console/endpoints/new"): {"name": "nothing-here", "workloads": "wl-nothing"},
    ("POST", "/console/endpoints/{name}/workloads"): {"workloads": "wl-nothing"},
}
CSRF = "guard-csrf"


def every_route(app) -> set[tuple[str, str]]:
    """(method, path) of every route the app serves; HEAD only mirrors GET."""
    return {(method, route.path) for route in iter_route_contexts(app.routes)
            for method in (route.methods or ()) if method != "HEAD"}


@dataclass(frozen=True)
class Caller:
    label: str
    token: str | None
    role: str | None = None


CALLERS = [Caller("no token", None), Caller("wrong token", WRONG_TOKEN),
           *(Caller(role, token, role) for role, token in ROLE_TOKENS.items())]


async def _call(api, method: str, template: str, caller: Caller):
    path = template.format(**{k: v for k, v in PARAMS.items() if "{" + k + "}" in template})
    console = template.startswith("/console")
    kwargs: dict = {"params": QUERY.get(template)}
    if console:
        # The console reads its token from the cookie only; its forms carry a matching CSRF pair.
        cookies = {"wingsmith_csrf": CSRF, **({"wingsmith_token": caller.token} if caller.token else {})}
        api.cookies.clear()
        api.cookies.update(cookies)
        if method == "POST":
            kwargs["data"] = {"csrf": CSRF, **CONSOLE_FORMS.get((method, template), {})}
    else:
        api.cookies.clear()
        kwargs["headers"] = {**(as_(caller.token) if caller.token else {}),
                             **EXTRA_HEADERS.get((method, template), {})}
        if method in ("POST", "PATCH", "PUT"):
            kwargs["json"] = BODIES.get((method, template), {})
    return await api.request(method, path, **kwargs)


def _judge(method: str, template: str, caller: Caller, response) -> str | None:
    """What is wrong with this answer, per the table; None when it is as the spec says."""
    required = ACCESS[(method, template)]
    console = template.startswith("/console")
    status = response.status_code
    where = f"{method} {template} as {caller.label}: {status}"
    if required == GATEWAY:  # no person's token opens it: 401, or 403 on a plane without a gateway token
        refused = (status == 401 and "Bearer" in response.headers.get("www-authenticate", "")) or (
            status == 403 and caller.token is not None)
        return None if refused else f"{where}, but only the gateway admin token may call it"
    if status >= 500:
        return f"{where} (server error) {response.text[:200]}"
    login_redirect = status == 303 and urlsplit(response.headers.get("location", "")).path == "/console/login"
    if required == PUBLIC:
        if status in (401, 403) or (login_redirect and method == "GET"):
            return f"{where}, but the route is public"
        return None
    if caller.role is None:
        if console:
            return None if login_redirect else f"{where}, expected a redirect to /console/login"
        error = response.json().get("error", {}) if status == 401 else {}
        if status != 401 or error.get("code") != "unauthenticated" or "Bearer" not in response.headers.get(
                "www-authenticate", ""):
            return f"{where}, expected 401 unauthenticated with WWW-Authenticate: Bearer"
        return None
    if caller.role in SATISFIES[required]:
        if status in (401, 403) or login_redirect:
            return f"{where}, but {caller.role} may call it"
        return None
    if status != 403:
        return f"{where}, but {caller.role} may not call it (needs {required})"
    message = response.text if console else response.json()["error"]["message"]
    if f"{required} role" not in message:
        return f"{where}: the refusal does not name the missing role {required}: {message[:200]}"
    return None


async def test_every_route_is_in_the_table(app):
    served = every_route(app)
    assert served - set(ACCESS) == set(), "routes without a row in ACCESS: decide who may call them"
    assert set(ACCESS) - served == set(), "rows in ACCESS for routes the app no longer serves"


def test_every_team_route_is_listed():
    """A route that names a workload, an endpoint or a watch is team-scoped (tests/teams shows how each
    answers another team); one that does not is the organisation's."""
    named = {(m, p) for m, p in ACCESS if any(word in p for word in ("workload", "endpoint", "watch"))
             and not p.startswith("/v1/workloads/plans/")}  # a plan's status: see TEAM_OWNED
    assert named == TEAM_OWNED


async def test_auth_matrix(app, api):
    problems = []
    answered = 0
    for method, template in sorted(every_route(app), key=lambda r: (r[1], r[0])):
        if (method, template) not in ACCESS:
            continue  # reported by test_every_route_is_in_the_table
        for caller in CALLERS:
            response = await _call(api, method, template, caller)
            answered += 1
            problem = _judge(method, template, caller, response)
            if problem:
                problems.append(problem)
    assert not problems, "\n".join(problems)
    assert answered == len(ACCESS) * len(CALLERS)


async def test_console_login_redirect_keeps_the_page(api):
    """A signed-out visitor of a gated page comes back to it after signing in."""
    api.cookies.clear()
    r = await api.get("/console/artifacts/acme/nothing@" + "0" * 40, params={"variant": "nvfp4"})
    assert r.status_code == 303
    target = parse_qs(urlsplit(r.headers["location"]).query)["next"][0]
    assert target == "/console/artifacts/acme/nothing@" + "0" * 40 + "?variant=nvfp4"


async def test_bearer_and_cookie_carry_the_same_principal(api):
    """The API also takes the console's cookie; a role is the same whichever way the token comes."""
    api.cookies.clear()
    api.cookies.set("wingsmith_token", "tok-vic")
    assert (await api.get("/v1/clusters")).status_code == 200
    refused = await api.post("/v1/workloads", json={})
    assert refused.status_code == 403 and "vic lacks the operator role" in refused.json()["error"]["message"]
    api.cookies.clear()


async def test_approval_is_attributed_to_the_token_only(api, deps, temporal_client, pg_pool):
    """A `reviewer` in the review body changes nothing: it can neither lend a self-approver another name
    nor put someone else's name on a decision. The recorded decision names the token's principal."""
    assert TOKENS["tok-sam"]["roles"] == ["operator", "approver"]
    async with running_worker(temporal_client, deps):
        r = await api.post("/v1/artifacts", json={"source": "hf:Qwen/Qwen3-8B"}, headers=as_("tok-sam"))
        assert r.status_code == 202, r.text
        artifact = r.json()["id"]
        url = f"/v1/artifacts/{artifact}/review"

        async def draft():
            got = await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))
            return got.status_code == 200 and got.json().get("state") == "draft"
        await wait_until(draft, what="the Qwen3-8B draft")

        # sam registered it, so sam may not approve it, whatever name the body claims.
        posing = await api.post(url, headers=as_("tok-sam"), json={
            "decision": "approve", "draft_version": 1, "reviewer": "ana"})
        assert posing.status_code == 403 and posing.json()["error"]["code"] == "self_approval", posing.text

        # ana approves while the body names sam: the decision is ana's.
        r = await api.post(url, headers=as_("tok-ana"), json={
            "decision": "approve", "draft_version": 1, "comment": "checked", "reviewer": "sam"})
        assert r.status_code == 200, r.text
        assert r.json()["decision"]["reviewer"] == "ana"

        outcome = await artifact_handle(temporal_client, artifact).result()
        assert outcome.decision.reviewer == "ana" and outcome.decision.via == "api"
        row = await pg_pool.fetchrow("select reviewer, via, comment from reviews where artifact_id = $1", artifact)
        assert dict(row) == {"reviewer": "ana", "via": "api", "comment": "checked"}
        shown = (await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()
        assert shown["state"] == "approved" and shown["review"]["reviewer"] == "ana"
        approvals = [e["actor"] for e in shown["events"] if e["kind"] == "draft_approved"]
        assert approvals == ["ana"]

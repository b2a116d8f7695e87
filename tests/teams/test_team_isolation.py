"""Teams own their workloads, endpoints and watches. A second operator team (red: rita, vera) can
neither see nor change the default team's (olga's) through the API, the console or the CLI: every
such object answers exactly as an absent one does. The admin (root, of a third team) sees and acts
on both; the default team, whose tokens name no team, keeps working as before teams existed. Who
did what (principal and team) is in the registry rows, the workflow history and the log."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from urllib.parse import quote

import httpx
import structlog
import uvicorn

from api.app import create_app
from api.auth import TokenTable
from contracts.ids import workload_workflow_id
from contracts.watch import watch_schedule_id
from tests.api_guard.test_auth_matrix import TEAM_OWNED
from tests.support import running_worker, wait_until
from tests.teams.conftest import as_
from wingsmith.cli.main import build_parser
from wingsmith.local.ports import free_port

BLUE, RED, NONE = "kimi-blue", "kimi-red", "kimi-none"  # olga's, rita's, and one nobody has
ENDPOINT, NO_ENDPOINT = "kimi-k3", "kimi-absent"
WATCH_PATH, NO_WATCH_PATH = "moonshotai/Kimi-K3@main", "moonshotai/Nothing-Here@main"
CSRF = "teams-csrf"

# Every route that names one team-owned object, with a body that would pass validation. A team-owned
# route (tests/api_guard's TEAM_OWNED) missing from these tables fails the test below.
OWNED_ROUTES: list[tuple[str, str, dict | None]] = [
    ("GET", "/v1/workloads/{workload_id}", None),
    ("PATCH", "/v1/workloads/{workload_id}", {"replicas": 2}),
    ("DELETE", "/v1/workloads/{workload_id}", None),
    ("POST", "/v1/workloads/{workload_id}/upgrade", {"artifact_id": "{artifact}"}),
    ("POST", "/v1/workloads/{workload_id}/upgrade/pause", None),
    ("POST", "/v1/workloads/{workload_id}/upgrade/resume", None),
    ("POST", "/v1/workloads/{workload_id}/upgrade/abort", None),
    ("PATCH", "/v1/workloads/{workload_id}/follow", {"follow": "auto"}),
    ("GET", "/v1/workloads/{workload_id}/autoscaling", None),
    ("POST", "/v1/workloads/{workload_id}/autoscaling/approve", {"tick": 1}),
    ("GET", "/v1/endpoints/{name}", None),
    ("PATCH", "/v1/endpoints/{name}", {"workloads": [RED]}),
    ("DELETE", "/v1/endpoints/{name}", None),
    ("POST", "/v1/watches/{org}/{name_at_branch}/{action}", None),
]


# The console's pages and forms on one object (other team's: 404, as the API says).
CONSOLE_OWNED: list[tuple[str, str, dict]] = [
    ("GET", "/console/workloads/{workload_id}", {}),
    ("POST", "/console/workloads/{workload_id}/scale", {"replicas": "3"}),
    ("POST", "/console/workloads/{workload_id}/delete", {}),
    ("POST", "/console/workloads/{workload_id}/upgrade/{action}", {}),
    ("POST", "/console/workloads/{workload_id}/autoscaling/approve", {"tick": "1", "decision": "approve"}),
    ("GET", "/console/endpoints/{name}", {}),
    ("POST", "/console/endpoints/{name}/workloads", {"workloads": RED}),
]
# Lists leave other teams' objects out; creating makes the creator's team's, whose forms offer only
# that team's workloads.
LISTS = {("GET", "/v1/workloads"), ("GET", "/v1/endpoints"), ("GET", "/v1/watches"), ("GET", "/console/workloads"),
         ("GET", "/console/endpoints")}
CREATES = {("POST", "/v1/workloads"), ("POST", "/v1/endpoints"), ("GET", "/console/workloads/new"),
           ("GET", "/console/workloads/new/check"), ("POST", "/console/workloads/new"),
           ("GET", "/console/endpoints/new"), ("POST", "/console/endpoints/new")}


def test_every_team_route_is_tried():
    tried = {(m, p) for m, p, _ in OWNED_ROUTES} | {(m, p) for m, p, _ in CONSOLE_OWNED} | LISTS | CREATES
    assert tried == TEAM_OWNED


def _fill(template: str, workload: str, endpoint: str, watch: str) -> str:
    org, name_at_branch = watch.split("/", 1)
    return template.format(workload_id=workload, name=endpoint, org=org, name_at_branch=quote(name_at_branch),
                           action="pause")


def _same_as_absent(present: httpx.Response, absent: httpx.Response, present_name: str, absent_name: str) -> bool:
    return (present.status_code == absent.status_code
            and present.text.replace(present_name, "<id>") == absent.text.replace(absent_name, "<id>"))


async def _until_serving(api, workload_id: str) -> None:
    async def check():
        got = (await api.get(f"/v1/workloads/{workload_id}", headers=as_("tok-root"))).json()
        return (got.get("live") or {}).get("stage") == "serving"
    await wait_until(check, timeout=60, interval=0.2, what=f"workload {workload_id} to serve")


async def _wait_for_watch(temporal_client) -> None:
    async def made():
        try:
            return await temporal_client.get_schedule_handle(watch_schedule_id("moonshotai/Kimi-K3", "main")).describe()
        except Exception:  # noqa: BLE001 - not made yet
            return None
    await wait_until(made, timeout=30, what="the Kimi-K3 watch")


def _payloads(history_json: str) -> list[str]:
    """The decoded JSON payloads of a history (inputs, update arguments, results)."""
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            if "data" in node and isinstance(node.get("metadata"), dict) and "encoding" in node["metadata"]:
                found.append(base64.b64decode(node["data"]).decode(errors="replace"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(json.loads(history_json))
    return found


async def test_a_second_team_neither_sees_nor_changes_the_first_teams_objects(
        api, deps, temporal_client, clusters, approved_kimi, gateway, pg_pool, settings, capsys, monkeypatch,
        pg_dsn, temporal_server):
    async with running_worker(temporal_client, deps):
        for token, name in (("tok-olga", BLUE), ("tok-rita", RED)):
            r = await api.post("/v1/workloads", headers=as_(token), json={
                "artifact_id": approved_kimi, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 1,
                "name": name, "served_model_name": "kimi-k3"})
            assert r.status_code == 202, r.text
        for name in (BLUE, RED):
            await _until_serving(api, name)
        r = await api.post("/v1/endpoints", headers=as_("tok-olga"), json={"name": ENDPOINT, "workloads": [BLUE]})
        assert r.status_code == 202, r.text
        await wait_until(lambda: pg_pool.fetchval("select team from endpoints where name = $1", ENDPOINT),
                         what="the endpoint's registry row")
        await _wait_for_watch(temporal_client)

        await _lists(api)
        await _refusals_are_logged(api)
        await _each_route_answers_as_absent(api, approved_kimi)
        await _names_are_taken_not_shown(api, approved_kimi)
        await _endpoints_take_only_their_teams_workloads(api)
        await _nothing_changed(api)
        await _admin_acts_on_both(api, temporal_client)
        await _who_did_what(pg_pool, temporal_client)
        await _console(api)
        served = settings.model_copy(update={"database_url": pg_dsn, "temporal_address": temporal_server.address,
                                             "temporal_namespace": temporal_client.namespace})
        await _cli(served, pg_pool, capsys, monkeypatch)


async def _lists(api) -> None:
    async def listed(token: str) -> tuple[set[str], set[str], set[str]]:
        workloads = (await api.get("/v1/workloads", headers=as_(token))).json()["workloads"]
        endpoints = (await api.get("/v1/endpoints", headers=as_(token))).json()["endpoints"]
        watches = (await api.get("/v1/watches", headers=as_(token))).json()["watches"]
        return {w["id"] for w in workloads}, {e["name"] for e in endpoints}, {w["id"] for w in watches}
    watch = watch_schedule_id("moonshotai/Kimi-K3", "main")
    # A viewer sees its own team's; the admin every team's.
    assert await listed("tok-olga") == ({BLUE}, {ENDPOINT}, {watch})
    assert await listed("tok-vic") == ({BLUE}, {ENDPOINT}, {watch})
    assert await listed("tok-rita") == ({RED}, set(), set())
    assert await listed("tok-vera") == ({RED}, set(), set())
    assert await listed("tok-root") == ({BLUE, RED}, {ENDPOINT}, {watch})
    teams = {w["id"]: w["team"] for w in (await api.get("/v1/workloads", headers=as_("tok-root"))).json()["workloads"]}
    assert teams == {BLUE: "default", RED: "red"}


async def _refusals_are_logged(api) -> None:
    # Each request's log lines carry its principal and team (structlog context); a refusal says whose it was.
    with structlog.testing.capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        r = await api.get(f"/v1/workloads/{BLUE}", headers=as_("tok-rita"))
    assert r.status_code == 404
    refused = [e for e in logs if e.get("event") == "refused: another team's object"]
    assert refused and refused[0]["principal"] == "rita" and refused[0]["team"] == "red", logs
    assert refused[0]["owner_team"] == "default" and refused[0]["object"] == BLUE
    assert structlog.contextvars.get_contextvars().get("principal") == "rita"


async def _each_route_answers_as_absent(api, artifact: str) -> None:
    for method, template, body in OWNED_ROUTES:
        body = json.loads(json.dumps(body).replace("{artifact}", artifact)) if body else None
        # An approval past the budget is an approver's (rex, of red); the other changes an operator's (rita).
        for token in ("tok-rex",) if template.endswith("/approve") else ("tok-rita", "tok-vera"):
            if method != "GET" and token == "tok-vera":
                continue  # a viewer is refused the change by role already (403), as the auth matrix shows
            present = await api.request(method, _fill(template, BLUE, ENDPOINT, WATCH_PATH), json=body,
                                        headers=as_(token))
            absent = await api.request(method, _fill(template, NONE, NO_ENDPOINT, NO_WATCH_PATH), json=body,
                                       headers=as_(token))
            assert present.status_code == 404, (method, template, token, present.text)
            names = (BLUE, NONE) if "{workload_id}" in template else (ENDPOINT, NO_ENDPOINT) \
                if "{name}" in template else (WATCH_PATH, NO_WATCH_PATH)
            assert _same_as_absent(present, absent, *names), (method, template, present.text, absent.text)


async def _names_are_taken_not_shown(api, artifact: str) -> None:
    # Names are global (a workflow id, a model name at the gateway): another team's says "taken", nothing more.
    r = await api.post("/v1/workloads", headers=as_("tok-rita"), json={
        "artifact_id": artifact, "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 1, "name": BLUE})
    assert r.status_code == 409 and r.json()["error"]["code"] == "workload_exists", r.text
    r = await api.post("/v1/endpoints", headers=as_("tok-rita"), json={"name": ENDPOINT, "workloads": [RED]})
    error = r.json()["error"]
    assert r.status_code == 409 and error["code"] == "endpoint_name_taken" and "details" not in error, r.text
    assert BLUE not in r.text and "olga" not in r.text


async def _endpoints_take_only_their_teams_workloads(api) -> None:
    foreign = await api.post("/v1/endpoints", headers=as_("tok-rita"),
                             json={"name": "red-model", "workloads": [BLUE]})
    absent = await api.post("/v1/endpoints", headers=as_("tok-rita"),
                            json={"name": "red-model", "workloads": [NONE]})
    assert foreign.status_code == 422 and _same_as_absent(foreign, absent, BLUE, NONE), (foreign.text, absent.text)
    r = await api.patch(f"/v1/endpoints/{ENDPOINT}", headers=as_("tok-olga"), json={"workloads": [BLUE, RED]})
    assert r.status_code == 422 and f"unknown workload(s): {RED}" in r.json()["error"]["message"], r.text
    # The endpoint's team counts, not the caller's: an admin cannot mix teams either.
    r = await api.patch(f"/v1/endpoints/{ENDPOINT}", headers=as_("tok-root"), json={"workloads": [RED]})
    assert r.status_code == 422 and f"unknown workload(s): {RED}" in r.json()["error"]["message"], r.text


async def _nothing_changed(api) -> None:
    blue = (await api.get(f"/v1/workloads/{BLUE}", headers=as_("tok-olga"))).json()
    assert blue["live"]["stage"] == "serving" and blue["live"]["replicas"] == 1 and blue["upgrade"] is None
    assert blue["follow"] == "manual"
    endpoint = (await api.get(f"/v1/endpoints/{ENDPOINT}", headers=as_("tok-olga"))).json()
    assert endpoint["workloads"] == [BLUE] and endpoint["state"] != "deleting"
    watches = (await api.get("/v1/watches", headers=as_("tok-olga"))).json()["watches"]
    assert [w["paused"] for w in watches] == [False]


async def _admin_acts_on_both(api, temporal_client) -> None:
    for name in (BLUE, RED):
        assert (await api.get(f"/v1/workloads/{name}", headers=as_("tok-root"))).status_code == 200
    r = await api.patch(f"/v1/workloads/{RED}", headers=as_("tok-root"), json={"replicas": 2})
    assert r.status_code == 200 and r.json()["replicas"] == 2, r.text
    r = await api.patch(f"/v1/workloads/{BLUE}/follow", headers=as_("tok-root"), json={"follow": "auto"})
    assert r.status_code == 200, r.text
    r = await api.get(f"/v1/endpoints/{ENDPOINT}", headers=as_("tok-root"))
    assert r.status_code == 200 and r.json()["team"] == "default", r.text
    for action in ("pause", "resume"):
        r = await api.post(f"/v1/watches/{WATCH_PATH}/{action}", headers=as_("tok-root"))
        assert r.status_code == 200, r.text
    # The default team (tokens without a team) acts on its own as before.
    r = await api.patch(f"/v1/workloads/{BLUE}/follow", headers=as_("tok-olga"), json={"follow": "manual"})
    assert r.status_code == 200, r.text


async def _who_did_what(pg_pool, temporal_client) -> None:
    rows = {r["id"]: (r["requested_by"], r["team"]) for r in await pg_pool.fetch(
        "select id, requested_by, team from workloads")}
    assert rows == {BLUE: ("olga", "default"), RED: ("rita", "red")}
    endpoint = await pg_pool.fetchrow("select requested_by, team from endpoints where name = $1", ENDPOINT)
    assert dict(endpoint) == {"requested_by": "olga", "team": "default"}
    follow_set = await pg_pool.fetch("select actor, team from events where kind = 'follow_set' and subject = $1 "
                                     "order by id", BLUE)
    assert [tuple(r) for r in follow_set] == [("root", "ops"), ("olga", "default")]
    assert await pg_pool.fetchval("select count(*) from events where subject = $1 and team = 'red'", RED) > 0
    history = await temporal_client.get_workflow_handle(workload_workflow_id(RED)).fetch_history()
    payloads = [json.loads(p) for p in _payloads(history.to_json()) if p.startswith("{")]
    assert any(p.get("requested_by") == "rita" and p.get("team") == "red" and "plan" in p for p in payloads)
    assert any(p.get("requested_by") == "root" and p.get("team") == "ops" and p.get("replicas") == 2
               for p in payloads)


async def _console(api) -> None:
    def as_cookie(token: str) -> None:
        api.cookies.clear()
        api.cookies.update({"wingsmith_token": token, "wingsmith_csrf": CSRF})
    try:
        as_cookie("tok-rita")
        page = await api.get("/console/workloads")
        assert page.status_code == 200 and RED in page.text and BLUE not in page.text
        page = await api.get("/console/endpoints")
        assert page.status_code == 200 and f'data-endpoint="{ENDPOINT}"' not in page.text
        page = await api.get("/console/endpoints/new")
        assert page.status_code == 200 and RED in page.text and BLUE not in page.text
        for method, template, form in CONSOLE_OWNED:
            as_cookie("tok-rex" if template.endswith("/approve") else "tok-rita")
            for workload, endpoint in ((BLUE, ENDPOINT), (NONE, NO_ENDPOINT)):  # another team's, and absent
                path = template.format(workload_id=workload, name=endpoint, action="abort")
                r = await api.request(method, path, data={"csrf": CSRF, **form} if method == "POST" else None)
                assert r.status_code == 404, (path, r.status_code, r.text[:300])
        as_cookie("tok-root")
        page = await api.get("/console/workloads")
        assert RED in page.text and BLUE in page.text
        assert (await api.get(f"/console/workloads/{BLUE}")).status_code == 200
        assert (await api.get(f"/console/endpoints/{ENDPOINT}")).status_code == 200
    finally:
        api.cookies.clear()
    r = await api.get(f"/v1/workloads/{BLUE}", headers=as_("tok-olga"))
    assert r.json()["live"]["replicas"] == 1 and r.json()["live"]["stage"] == "serving"


async def _cli(served, pg_pool, capsys, monkeypatch) -> None:
    """`wingsmith workloads ...` against the API served over HTTP, with each team's token."""
    with _serving(create_app(served, tokens=TokenTable.from_json(served.auth_tokens))) as base:
        cli = cli_over_http(base, capsys, monkeypatch)
        code, out, _ = await cli("tok-rita", "workloads", "list")
        assert code == 0 and RED in out and BLUE not in out, out
        code, out, err = await cli("tok-rita", "workloads", "show", BLUE)
        assert code == 3 and f"workload {BLUE} not found" in err, (out, err)
        code, _, err = await cli("tok-rita", "workloads", "scale", BLUE, "3")
        assert code == 3 and "not found" in err, err
        code, _, err = await cli("tok-rita", "workloads", "delete", BLUE)
        assert code == 3 and "not found" in err, err
        code, out, _ = await cli("tok-rita", "endpoints", "list")
        assert code == 0 and ENDPOINT not in out, out
        code, _, err = await cli("tok-rita", "endpoints", "delete", ENDPOINT)
        assert code == 3 and "not found" in err, err
        code, out, _ = await cli("tok-root", "workloads", "list")
        assert code == 0 and RED in out and BLUE in out and "red" in out, out
        code, out, _ = await cli("tok-olga", "workloads", "list")
        assert code == 0 and BLUE in out and RED not in out, out
    assert (await pg_pool.fetchval("select state from workloads where id = $1", BLUE)) not in ("deleting", "deleted")


def cli_over_http(base: str, capsys, monkeypatch):
    """`wingsmith ...` against the API at `base` with a token, off the event loop: (exit code, stdout, stderr)."""
    async def cli(token: str, *argv: str) -> tuple[int, str, str]:
        monkeypatch.setenv("WINGSMITH_TOKEN", token)
        args = build_parser().parse_args([*argv, "--api", base])
        capsys.readouterr()
        code = await asyncio.to_thread(args.func, args)
        out = capsys.readouterr()
        return code, out.out, out.err
    return cli


class _serving:
    """The app behind uvicorn on a thread of its own (the CLI speaks HTTP); yields its base URL."""

    def __init__(self, app) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, lifespan="on",
                                                    log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, name="teams-uvicorn", daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise AssertionError("the API server did not start")
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)

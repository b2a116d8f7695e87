"""The watch on upstream, end to end on real Temporal, Postgres and the offline Hub: approving an
artifact of a branch creates the Schedule `watch/<org>/<name>@<branch>`; a run with nothing new opens
nothing; after `wingsmith hub commit`, a triggered run opens a new draft whose API view names the
changed config key against the approved artifact, logs it and notifies the webhook (by reference);
the watch pauses and resumes; approving the new draft keeps one watch."""

from __future__ import annotations

import json
import os
import re
import threading
from html import unescape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from temporalio.service import RPCError

from tests.artifacts.conftest import HF_TOKEN, HF_TOKEN_ENV, TOKENS, api, as_, deps, hub  # noqa: F401
from tests.console.conftest import sign_in
from tests.support import history_json, running_worker, save_history, wait_until
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.cli.main import build_parser
from wingsmith.domain.config import Settings, get_settings

REPO = "openai/gpt-oss-20b"
WATCH = f"watch/{REPO}@main"
OTHER = "openai/gpt-oss-120b"
OTHER_WATCH = f"watch/{OTHER}@main"
WEBHOOK_ENV = "WINGSMITH_TEST_WATCH_WEBHOOK"


@pytest.fixture
def webhook():
    got: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hooks/wingsmith", got
    server.shutdown()
    server.server_close()


@pytest.fixture
def settings(hub, webhook, tmp_path, monkeypatch) -> Settings:  # noqa: F811
    from tests.conftest import unique_queue
    monkeypatch.setenv(HF_TOKEN_ENV, HF_TOKEN)
    monkeypatch.setenv(WEBHOOK_ENV, webhook[0])
    return Settings(home=tmp_path / "home", hf_endpoint=hub.url, hf_token_ref=HF_TOKEN_ENV,
                    task_queue=unique_queue("watch"), auth_tokens=json.dumps(TOKENS), log_format="json",
                    watch_webhook_ref=WEBHOOK_ENV)


async def _register_and_approve(api, source: str) -> dict:  # noqa: F811
    r = await api.post("/v1/artifacts", json={"source": source}, headers=as_("tok-olga"))
    assert r.status_code in (200, 201, 202), r.text
    artifact = r.json()["id"]
    return await _approve(api, artifact)


async def _approve(api, artifact: str) -> dict:  # noqa: F811
    async def drafted():
        got = (await api.get(f"/v1/artifacts/{artifact}", headers=as_("tok-vic"))).json()
        return got if got.get("state") in ("draft", "approved") and got.get("draft") else None
    got = await wait_until(drafted, timeout=60, what=f"the draft of {artifact}")
    if got["state"] == "draft":
        r = await api.post(f"/v1/artifacts/{artifact}/review", headers=as_("tok-ana"),
                           json={"decision": "approve", "draft_version": got["draft"]["version"]})
        assert r.status_code == 200, r.text
    return got


async def _next_run(temporal_client, seen: set[str], watch: str = WATCH):
    """The outcome of the schedule's newest run that is not in `seen`."""
    handle = temporal_client.get_schedule_handle(watch)

    async def started():
        # By run id: two runs started within one second share the workflow id the schedule gives them.
        actions = (await handle.describe()).info.recent_actions
        fresh = [a.action for a in actions if a.action.first_execution_run_id not in seen]
        return fresh[-1] if fresh else None
    action = await wait_until(started, timeout=30, what="a run of the watch")
    seen.add(action.first_execution_run_id)
    run = temporal_client.get_workflow_handle(action.workflow_id, run_id=action.first_execution_run_id)
    return run, await run.result()


async def test_a_new_commit_opens_a_draft_with_a_diff(
        api, deps, temporal_client, hub, webhook, pg_pool, monkeypatch, capsys):  # noqa: F811
    url, notices = webhook
    async with running_worker(temporal_client, deps):
        approved = await _register_and_approve(api, f"hf:{REPO}")
        old_sha = approved["sha"]

        async def watched():
            listed = (await api.get("/v1/watches", headers=as_("tok-vic"))).json()["watches"]
            return next((w for w in listed if w["id"] == WATCH), None)
        watch = await wait_until(watched, timeout=20, what="the watch schedule")
        assert watch["repo_id"] == REPO and watch["branch"] == "main" and watch["paused"] is False
        assert watch["next_runs"], watch
        desc = await temporal_client.get_schedule_handle(WATCH).describe()
        assert desc.schedule.spec.intervals[0].every.total_seconds() == 24 * 3600  # daily by default

        seen = {a.action.first_execution_run_id for a in desc.info.recent_actions}
        r = await api.post(f"/v1/watches/{REPO}@main/trigger", headers=as_("tok-olga"))
        assert r.status_code == 200, r.text
        _, outcome = await _next_run(temporal_client, seen)
        assert outcome["opened"] is None and outcome["head_sha"] == old_sha, outcome

        # Upstream moves: a new commit on main changes one config key.
        monkeypatch.setenv("WINGSMITH_HF_ENDPOINT", hub.url)
        get_settings.cache_clear()
        args = build_parser().parse_args(["hub", "commit", REPO, "--set", "max_position_embeddings=65536"])
        assert args.func(args) == 0
        new_sha = capsys.readouterr().out.strip()
        get_settings.cache_clear()
        assert len(new_sha) == 40 and new_sha != old_sha

        r = await api.post(f"/v1/watches/{REPO}@main/trigger", headers=as_("tok-olga"))
        assert r.status_code == 200, r.text
        run, outcome = await _next_run(temporal_client, seen)
        new_id = f"{REPO}@{new_sha}"
        assert outcome["opened"] == new_id and outcome["head_sha"] == new_sha, outcome

        async def drafted():
            got = (await api.get(f"/v1/artifacts/{new_id}", headers=as_("tok-vic"))).json()
            return got if got.get("state") == "draft" and got.get("draft") else None
        draft = await wait_until(drafted, timeout=60, what="the watch's draft")
        diff = draft["diff"]
        assert diff["against"] == approved["id"], diff
        assert diff["changed"] == ["config.max_position_embeddings"], diff
        change = diff["config"][0]
        assert change["key"] == "max_position_embeddings" and change["new"] == 65536 and change["approved"] != 65536
        assert diff["weight_bytes"]["approved"] == diff["weight_bytes"]["new"] and not diff["variants"]
        assert draft["requested_by"] == f"watch {REPO}@main"
        assert notices == [{"event": "upstream_moved", "repo_id": REPO, "branch": "main",
                            "approved_id": approved["id"], "new_artifact_id": new_id, "head_sha": new_sha,
                            "reason": "new commit", "catalog_version": None}]
        # The console's draft page shows the same diff.
        await sign_in(api, "tok-vic")
        page = unescape((await api.get(f"/console/artifacts/{new_id}")).text)
        assert 'id="diff"' in page and f"Against {approved['id']}" in re.sub(r"<[^>]+>", "", page)
        assert '<tr data-key="max_position_embeddings">' in page and "<code>65536</code>" in page
        if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
            save_history("watch_opened_draft", run.id, await history_json(run))

        # Running it again opens nothing twice.
        await api.post(f"/v1/watches/{REPO}@main/trigger", headers=as_("tok-olga"))
        _, outcome = await _next_run(temporal_client, seen)
        assert outcome["opened"] is None and "has an artifact already" in outcome["note"], outcome

        # Pause and resume.
        r = await api.post(f"/v1/watches/{REPO}@main/pause", headers=as_("tok-olga"))
        assert r.status_code == 200 and r.json()["paused"] is True and "olga" in r.json()["note"], r.text
        # The list is Temporal's schedule listing, which follows the pause a moment later (visibility).
        async def listed_paused():
            return (await watched())["paused"] is True
        await wait_until(listed_paused, timeout=30, what="the listing to show the pause")
        r = await api.post(f"/v1/watches/{REPO}@main/resume", headers=as_("tok-olga"))
        assert r.status_code == 200 and r.json()["paused"] is False, r.text
        r = await api.post("/v1/watches/nobody/nothing@main/trigger", headers=as_("tok-olga"))
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
        r = await api.post(f"/v1/watches/{REPO}@main/trigger", headers=as_("tok-vic"))
        assert r.status_code == 403

        # Approving the new draft keeps one watch for the branch, and the diff stays on the page.
        await _approve(api, new_id)
        schedules = [s.id async for s in await temporal_client.list_schedules() if s.id.startswith(WATCH)]
        assert schedules == [WATCH]


async def test_a_recipe_change_opens_a_draft_at_the_same_commit(
        api, deps, temporal_client, webhook, settings, capsys):  # noqa: F811
    """The catalog trigger: `wingsmith recipes edit` puts a new catalog version in force; the next run opens
    `<repo>@<sha>+recipes-<hash>` whose diff shows the evidence, flag and --max-num-seqs change. (Another
    repository than the test above, whose watch keeps that test's task queue.)"""
    _, notices = webhook
    async with running_worker(temporal_client, deps):
        approved = await _register_and_approve(api, f"hf:{OTHER}")
        shipped = approved["draft"]["catalog_version"]

        async def described():
            try:
                return await temporal_client.get_schedule_handle(OTHER_WATCH).describe()
            except RPCError:
                return None  # the approval creates it just after the decision is recorded
        desc = await wait_until(described, timeout=20, what="the watch schedule")
        seen = {a.action.first_execution_run_id for a in desc.info.recent_actions}
        await api.post(f"/v1/watches/{OTHER}@main/trigger", headers=as_("tok-olga"))
        _, outcome = await _next_run(temporal_client, seen, OTHER_WATCH)
        assert outcome["opened"] is None and outcome["note"] == "unchanged", outcome
        assert outcome["catalog_version"] == shipped  # each run records the catalog it looked at

        args = build_parser().parse_args([
            "recipes", "edit", OTHER, "--catalog-dir", str(settings.catalogs_dir),
            "--set", f"base_args={json.dumps([*load_catalog().find(OTHER).recipe.base_args, '--max-num-seqs', '64'])}",
            "--set", "variants.default.vram_minimum_gb=99"])
        assert args.func(args) == 0
        version = re.search(r"catalog (\S+) in force", capsys.readouterr().out).group(1)
        assert version != shipped

        await api.post(f"/v1/watches/{OTHER}@main/trigger", headers=as_("tok-olga"))
        run, outcome = await _next_run(temporal_client, seen, OTHER_WATCH)
        new_id = f"{approved['id']}+recipes-{version.rsplit('.', 1)[-1]}"
        assert outcome["opened"] == new_id and outcome["catalog_version"] == version, outcome
        if os.environ.get("WINGSMITH_RECORD_HISTORIES") == "1":
            save_history("watch_opened_catalog_draft", run.id, await history_json(run))

        async def drafted():
            got = (await api.get(f"/v1/artifacts/{new_id}", headers=as_("tok-vic"))).json()
            return got if got.get("state") == "draft" and got.get("draft") else None
        draft = await wait_until(drafted, timeout=60, what="the catalog draft")
        assert draft["sha"] == approved["sha"] and draft["draft"]["catalog_version"] == version
        diff = draft["diff"]
        assert diff["against"] == approved["id"] and not diff["config"], diff
        # The tested shapes say which floor they hold (issue 48: the smallest shape that holds it), so a floor
        # change moves them too.
        assert diff["changed"] == ["catalog_version", "evidence.tested_shapes", "flag.--max-num-seqs", "max_num_seqs",
                                   "variant.default"], diff
        assert diff["variants"][0]["new"]["vram_minimum_gb"] == 99
        assert diff["command"]["flags"] == [{"flag": "--max-num-seqs", "approved": None, "new": "64"}]
        assert diff["command"]["max_num_seqs"]["new"] == 64
        assert notices[-1]["event"] == "recipe_evidence_moved" and notices[-1]["new_artifact_id"] == new_id
        await sign_in(api, "tok-vic")
        page = unescape((await api.get(f"/console/artifacts/{new_id}")).text)
        assert 'id="diff-flags"' in page and '<tr data-flag="--max-num-seqs">' in page, page
        assert 'id="diff-max-num-seqs"' in page

        # Once is enough.
        await api.post(f"/v1/watches/{OTHER}@main/trigger", headers=as_("tok-olga"))
        _, outcome = await _next_run(temporal_client, seen, OTHER_WATCH)
        assert outcome["opened"] is None and "has a draft for this model already" in outcome["note"], outcome

        # A second recipe change before the review: its draft supersedes the first one.
        args = build_parser().parse_args([
            "recipes", "edit", OTHER, "--catalog-dir", str(settings.catalogs_dir),
            "--set", "variants.default.vram_minimum_gb=98"])
        assert args.func(args) == 0
        second = re.search(r"catalog (\S+) in force", capsys.readouterr().out).group(1)
        await api.post(f"/v1/watches/{OTHER}@main/trigger", headers=as_("tok-olga"))
        _, outcome = await _next_run(temporal_client, seen, OTHER_WATCH)
        newer_id = f"{approved['id']}+recipes-{second.rsplit('.', 1)[-1]}"
        assert outcome["opened"] == newer_id, outcome

        async def superseded():
            got = (await api.get(f"/v1/artifacts/{new_id}", headers=as_("tok-vic"))).json()
            return got if got.get("state") == "superseded" else None
        gone = await wait_until(superseded, timeout=30, what="the first draft superseded")
        assert gone["superseded_by"] == newer_id

        # Once approved, the same catalog is nothing new; a workload planned from it runs its flags.
        await _approve(api, newer_id)
        choice = diff["command"]["choice"]
        r = await api.post("/v1/workloads", headers=as_("tok-olga"), json={
            "artifact_id": newer_id, "hardware": choice["hardware"], "layout": choice["layout"], "dry_run": False})
        assert r.status_code == 202, r.text
        plan = r.json()["plan"]
        assert plan["max_num_seqs"] == 64 and "vLLM recipe" in plan["max_num_seqs_source"], plan
        await api.post(f"/v1/watches/{OTHER}@main/trigger", headers=as_("tok-olga"))
        _, outcome = await _next_run(temporal_client, seen, OTHER_WATCH)
        assert outcome["opened"] is None and outcome["note"] == "unchanged", outcome

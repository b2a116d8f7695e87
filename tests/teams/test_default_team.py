"""A plane from before teams keeps working: its rows belong to the default team after the migration,
and a token table without teams puts everyone in that team."""

from __future__ import annotations

from api.auth import TokenTable
from tests.conftest import database_before
from wingsmith.adapters.store import endpoints as endpoint_store
from wingsmith.adapters.store import workloads as workload_store
from wingsmith.adapters.store.db import migrate
from wingsmith.domain.teams import DEFAULT_TEAM

TEAMS_MIGRATION = "0004_teams.sql"


async def test_rows_from_before_teams_belong_to_the_default_team(pg_server):
    async with database_before(pg_server, TEAMS_MIGRATION) as pool:
        async with pool.acquire() as conn:
            await conn.execute("insert into artifacts (id, repo_id, revision, sha, state, workflow_id, requested_by) "
                               "values ('o/m@abc', 'o/m', 'main', 'abc', 'approved', 'artifact/o/m@abc', 'olga')")
            await conn.execute("insert into workloads (id, artifact_id, spec, state, workflow_id, requested_by) "
                               "values ('old-wl', 'o/m@abc', '{}', 'serving', 'workload/old-wl', 'olga')")
            await conn.execute("insert into endpoints (name, workloads, state, workflow_id) "
                               "values ('old-ep', '[\"old-wl\"]', 'serving', 'endpoint/old-ep')")
        assert TEAMS_MIGRATION in await migrate(pool)

        assert [(w["id"], w["team"]) for w in await workload_store.list_workloads(pool, team=DEFAULT_TEAM)] \
            == [("old-wl", DEFAULT_TEAM)]
        assert [e["name"] for e in await endpoint_store.list_endpoints(pool, team=DEFAULT_TEAM)] == ["old-ep"]
        assert await workload_store.list_workloads(pool, team="red") == []
        assert await endpoint_store.list_endpoints(pool, team="red") == []
        # A later write by the workflow (which knows no team in an old history) keeps the row's team.
        await workload_store.upsert_workload(pool, workload_id="old-wl", artifact_id="o/m@abc", spec={},
                                             state="serving", workflow_id="workload/old-wl", requested_by="olga",
                                             step="later", team="red")
        assert await pool.fetchval("select team from workloads where id = 'old-wl'") == DEFAULT_TEAM


def test_tokens_without_a_team_are_the_default_teams():
    table = TokenTable.from_json('{"t1": {"name": "olga", "roles": ["operator"]}, '
                                 '"t2": {"name": "rita", "roles": ["operator"], "team": "red"}}')
    olga, rita = table.lookup("t1"), table.lookup("t2")
    assert olga is not None and olga.team == DEFAULT_TEAM
    assert rita is not None and rita.team == "red"

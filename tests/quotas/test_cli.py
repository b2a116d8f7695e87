"""`wingsmith teams quota set|show|remove` and a `wingsmith workloads create` past the quota, against the API
served over HTTP (uvicorn on a loopback port, its own pool and Temporal client, as a deployed API), with each
team's token: the admin sets, the team reads its own, a create past it exits 4 with the numbers, a dry run
prints whether it fits."""

from __future__ import annotations

import json

import pytest

from api.app import create_app
from api.auth import TokenTable
from tests.support import running_worker, wait_for_pollers
from tests.teams.test_team_isolation import _serving, cli_over_http
from wingsmith.domain.config import get_settings


@pytest.fixture
def served(settings, pg_dsn, temporal_server, temporal_client):
    return settings.model_copy(update={"database_url": pg_dsn, "temporal_address": temporal_server.address,
                                       "temporal_namespace": temporal_client.namespace})


async def test_a_quota_is_set_shown_and_refuses_a_create_through_the_cli(served, deps, temporal_client, clusters,
                                                                          approved_kimi, capsys, monkeypatch):
    get_settings.cache_clear()
    with _serving(create_app(served, tokens=TokenTable.from_json(served.auth_tokens))) as base:
        cli = cli_over_http(base, capsys, monkeypatch)
        code, out, err = await cli("tok-root", "teams", "quota", "set", "red", "--gpus", "h200=16", "--gpus", "*=32",
                                   "--budget", "500")
        assert code == 0, err
        assert "h200 ≤ 16 GPUs, * ≤ 32 GPUs, budget ≤ 500.00 per hour; past it: refuse" in out, out
        code, out, err = await cli("tok-vera", "teams", "quota", "show", "red")
        assert code == 0, err
        rows = [line.split() for line in out.splitlines()]
        assert ["LIMIT", "USED", "QUOTA", "UNIT", "LEFT"] in rows and ["h200", "0", "16", "GPUs", "16"] in rows, out
        assert out.rstrip().endswith("team red is within its quota"), out
        code, out, _ = await cli("tok-vera", "teams", "quota", "show", "red", "--json")
        assert json.loads(out)["quota"]["gpus"] == {"h200": 16, "*": 32}

        assert (await cli("tok-olga", "teams", "quota", "show", "red"))[0] == 3  # another team's: not found
        code, _, err = await cli("tok-rita", "teams", "quota", "set", "red", "--gpus", "h200=64")
        assert code == 4 and "rita lacks the admin role" in err, err
        for bad, words in ((["--gpus", "h200"], "must look like CARD=N"), ([], "give --gpus"),
                           (["--gpus", "h900=8"], "unknown hardware 'h900'")):
            code, _, err = await cli("tok-root", "teams", "quota", "set", "red", *bad)
            assert code == 2 and words in err, (bad, err)

        create = ["workloads", "create", approved_kimi, "--hardware", "h200", "--layout", "multi_node_tp_dp",
                  "--replicas", "2", "--name", "red-cli"]
        code, out, err = await cli("tok-rita", *create)
        assert code == 4, (out, err)
        assert "Past team red's quota: h200: 0 used + 32 asked > 16 GPUs" in err, err
        assert "  every card (*): 0 used + 32 asked ≤ 32 GPUs" in err, err
        async with running_worker(temporal_client, deps):  # a dry run reads the clusters through the worker
            await wait_for_pollers(temporal_client, deps.settings)
            code, out, err = await cli("tok-rita", *create, "--dry-run")
        assert code == 0, err
        assert "quota: past team red's quota: h200: 0 used + 32 asked > 16 GPUs" in out, out
        assert "  budget: 0 used + 0 asked ≤ 500 per hour" in out, out  # no cluster carries a price here

        code, out, err = await cli("tok-root", "teams", "quota", "remove", "red")
        assert (code, out.strip()) == (0, "removed team red's quota: it is not limited any more"), err
        assert (await cli("tok-root", "teams", "quota", "remove", "red"))[0] == 3
    get_settings.cache_clear()

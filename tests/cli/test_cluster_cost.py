"""A cluster's cost per GPU-hour: registered with `clusters add --cost-per-gpu-hour`, changed or forgotten
with `clusters update` (PATCH /v1/clusters/{name}), shown by `clusters show`, the API's GET and the
console's cluster page; refused in the API's words when it is not a finite number ≥ 0. Against a real API
server (uvicorn on a loopback port, real Postgres), as tests/placement/test_clusters_cli.py runs it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape

import httpx
import pytest

from tests.console.conftest import sign_in
from tests.placement.test_clusters_cli import api_url, cli  # noqa: F401 - fixtures
from wingsmith.domain.config import get_settings


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    """The CLI finds the API through settings read once per process: read them again with this test's."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _shown_cost(cli) -> str:  # noqa: F811
    code, out, err = cli("show", "priced", token="tok-view")
    assert code == 0, err
    return re.search(r"^cost per GPU-hour +(.+)$", out, re.M)[1]


def test_a_cluster_s_cost_is_set_changed_forgotten_and_refused_in_words(cli, api_url):  # noqa: F811
    code, out, err = cli("add", "priced", "--kubeconfig", "env:KUBECONFIG_PRICED", "--manual", "h200=2",
                         "--cost-per-gpu-hour", "2.5")
    assert code == 0, err
    assert _shown_cost(cli) == "2.5"
    assert json.loads(cli("show", "priced", "--json", token="tok-view")[1])["cost_per_gpu_hour"] == 2.5
    # The same settings again change nothing; another price under the same name is another registration.
    assert cli("add", "priced", "--kubeconfig", "env:KUBECONFIG_PRICED", "--manual", "h200=2",
               "--cost-per-gpu-hour", "2.5")[0] == 0
    assert cli("add", "priced", "--kubeconfig", "env:KUBECONFIG_PRICED", "--manual", "h200=2",
               "--cost-per-gpu-hour", "3")[0] == 5

    code, out, err = cli("update", "priced", "--cost-per-gpu-hour", "1.75")
    assert (code, out.strip()) == (0, "updated priced: cost per GPU-hour 1.75"), err
    assert _shown_cost(cli) == "1.75"
    assert cli("update", "priced", "--no-cost")[1].strip() == "updated priced: cost per GPU-hour unknown"
    assert _shown_cost(cli) == "unknown"

    code, _, err = cli("update", "priced", "--cost-per-gpu-hour", "-1")
    assert code == 2 and "body.cost_per_gpu_hour: Input should be greater than or equal to 0" in err, err
    code, _, err = cli("add", "cheap", "--kubeconfig", "env:KUBECONFIG_CHEAP", "--cost-per-gpu-hour", "-0.5")
    assert code == 2 and "cost_per_gpu_hour" in err, err
    assert cli("update", "nowhere", "--cost-per-gpu-hour", "1")[0] == 3
    assert cli("update", "priced", "--cost-per-gpu-hour", "1", token="tok-view")[0] == 4

    admin = {"Authorization": "Bearer tok-admin"}
    for body, code, words in (({}, "nothing_to_change", "nothing to change"),
                              ({"region": "eu"}, "invalid", "body.region: Extra inputs are not permitted"),
                              ({"cost_per_gpu_hour": "Infinity"}, "invalid", "finite number")):
        r = httpx.patch(f"{api_url}/v1/clusters/priced", json=body, headers=admin)
        assert r.status_code == 422 and r.json()["error"]["code"] == code, r.text
        assert words in r.json()["error"]["message"], r.text
    assert _shown_cost(cli) == "unknown"  # nothing refused was written


async def test_the_cluster_page_shows_the_cost(cli, api_url):  # noqa: F811
    assert cli("add", "shown", "--kubeconfig", "env:KUBECONFIG_SHOWN", "--manual", "b200=1",
               "--cost-per-gpu-hour", "4.2")[0] == 0
    async with httpx.AsyncClient(base_url=api_url) as browser:
        await sign_in(browser, "tok-view")
        page = await browser.get("/console/clusters/shown")
        assert page.status_code == 200, page.text
        assert re.search(r'id="cluster-cost">\s*4.2\s*<', page.text), page.text
        assert cli("update", "shown", "--no-cost")[0] == 0
        page = await browser.get("/console/clusters/shown")
        cell = re.search(r'id="cluster-cost">(.*?)</td>', page.text, re.S)[1]
        assert "unknown" in unescape(cell)
    assert cli("remove", "shown")[0] == 0

"""The endpoint page's request counts come from the gateway's memory, which a restart empties: the
page says so where it shows them ("since the gateway started"), not only in a tooltip."""

from __future__ import annotations

import re
from types import SimpleNamespace

from console.rendering import templates


def _page(requests: int | None) -> str:
    backend = {"id": "b1", "cluster": "sim-east", "workload_id": "w", "served_model": "m", "url": "http://b",
               "weight": 100, "share": 100, "health": "healthy", "health_words": "", "draining_until": None,
               "last_error": None, "requests": requests, "failures": 0, "in_flight": 0, "p50_ms": None,
               "p99_ms": None}
    request = SimpleNamespace(query_params={}, url=SimpleNamespace(path="/console/endpoints/m"))
    return templates.env.get_template("endpoint.html").render(
        request=request, e={"name": "m", "workloads": ["w"], "state": "ready", "health_error": None},
        backends=[backend], serving=1, base_url="http://gateway", curl="curl", workload_path=lambda w: f"/w/{w}",
        principal=SimpleNamespace(has=lambda role: False), csrf="c")


def test_counts_say_since_when():
    html = _page(7)
    header = re.search(r"<thead>(.*?)</thead>", html, re.S).group(1)
    visible = re.sub(r"<[^>]+>", " ", header)  # the words a reader sees, not a title attribute
    assert "since the gateway started" in " ".join(visible.split())
    assert "7 answered" in html

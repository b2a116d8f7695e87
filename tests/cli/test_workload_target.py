"""`wingsmith workloads create` sized by traffic: the five target flags go together and exclude --replicas
(refused before any request), the body carries the API's `target`, and the answer is printed as a plan per
candidate card (configuration, replicas, GPUs, predicted TTFT/TPOT and throughput, why it lost). A plan
still under way (202 `state: planning`) is followed at its status URL with its progress printed, and a create
is sent again once it is there (issue 52). The CLI
talks real HTTP to a stand-in of the API that answers with a choice made by the plane's own choosing code;
the planning itself is tested against AIConfigurator in tests/perf."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.perf.test_planning import _config
from wingsmith.cli.main import _run
from wingsmith.domain.config import get_settings
from wingsmith.domain.draft_performance import NOT_INSTALLED
from wingsmith.domain.perf.traffic import TrafficTarget, plan_card
from wingsmith.domain.target_plan import choose_card

TARGET = {"requests_per_second": 20.0, "isl": 4000, "osl": 1000, "ttft_ms": 1000.0, "tpot_ms": 40.0}
FLAGS = ["--target-rps", "20", "--isl", "4000", "--osl", "1000", "--ttft-ms", "1000", "--tpot-ms", "40"]
CREATE = ["workloads", "create", "qwen/qwen3-8b@" + "a" * 40, "--hardware", "h200"]


class StandIn:
    """An HTTP server that records each request and answers the next canned (status, body)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict]] = []
        self.answers: list[tuple[int, dict]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.do_POST(method="GET")

            def do_POST(self, method: str = "POST") -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                stand_in.requests.append((method, self.path, json.loads(self.rfile.read(length) or b"{}")))
                status, body = stand_in.answers.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def api(monkeypatch) -> Iterator[StandIn]:
    monkeypatch.setenv("WINGSMITH_TOKEN", "tok-test")
    get_settings.cache_clear()  # the CLI reads settings once per process: not another test's
    stand_in = StandIn()
    thread = threading.Thread(target=stand_in.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        stand_in.server.shutdown()
        stand_in.server.server_close()
        thread.join()
        get_settings.cache_clear()


def _choice(prices: dict[str, float] | None = None):
    target = TrafficTarget(**TARGET)
    # h200: 2-GPU replicas at 2 req/s; b200: 4-GPU replicas at 8 req/s; h100 misses the TTFT target.
    return choose_card([plan_card("h200", target, [_config("agg", 2, 2.0, 500, 30)]),
                        plan_card("b200", target, [_config("agg", 4, 8.0, 400, 20)]),
                        plan_card("h100", target, [_config("agg", 8, 9.0, 1500, 30)])], prices)


def _dry_run_answer(choice) -> dict:
    chosen = choice.chosen
    plan = {"workload_id": "qwen3-8b", "served_model_name": "Qwen/Qwen3-8B", "hf_model_id": "Qwen/Qwen3-8B",
            "replicas": chosen.replicas, "gpus_per_replica": chosen.configuration.gpus_per_replica,
            "hardware": chosen.card, "layout": "single_node_tp", "max_num_seqs": 8,
            "max_num_seqs_source": "AIConfigurator"}
    return {"dry_run": True, "plan": plan, "placement": {"summary": "placed on sim-east"}, "manifests": {},
            "target_plan": choice.model_dump(mode="json")}


@pytest.mark.parametrize(("extra", "words"), [
    (["--replicas", "2", "--target-rps", "20"], "give either --replicas or a traffic target (--target-rps)"),
    (["--target-rps", "20", "--ttft-ms", "1000"], "missing: --isl, --osl, --tpot-ms"),
])
def test_a_half_or_mixed_sizing_is_refused_before_any_request(api, capsys, extra, words) -> None:
    assert _run([*CREATE, *extra, "--api", api.url]) == 2
    assert words in capsys.readouterr().err
    assert api.requests == []


def test_a_dry_run_prints_the_plan_and_every_card_s_candidate(api, capsys) -> None:
    choice = _choice({"h200": 1.0, "b200": 2.0, "h100": 0.5})
    api.answers.append((202, _dry_run_answer(choice)))
    assert _run([*CREATE, *FLAGS, "--dry-run", "--api", api.url]) == 0
    (_, path, body), = api.requests
    assert path == "/v1/workloads" and body["target"] == TARGET and "replicas" not in body and body["dry_run"]
    out = capsys.readouterr().out
    chosen = choice.chosen
    assert chosen is not None and chosen.configuration is not None
    assert (f"chosen: {chosen.card}, {chosen.replicas} × {chosen.configuration.parallelism} (agg), "
            f"{chosen.gpus} GPUs") in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in
             ("h200", "b200", "h100")}
    for candidate in choice.candidates:
        plan, conf = candidate.plan, candidate.plan.configuration
        assert conf is not None
        line = lines[plan.card]
        cells = line.split()
        assert cells[1:3] == ["agg", conf.parallelism], line
        assert f"{conf.ttft_ms:.0f}" in cells and f"{conf.tpot_ms:.1f}" in cells, line
        assert f"{conf.tokens_per_second_per_gpu:.0f}" in cells, line
        assert line.endswith(candidate.why_not or "chosen"), line
        if plan.meets_target:
            assert cells[3:5] == [str(plan.replicas), str(plan.gpus)], line
            assert f"{candidate.cost_per_hour:.2f}" in cells, line
    assert "dearer" in lines["b200"] and "TTFT" in lines["h100"]


def test_an_unreachable_target_prints_what_each_card_reaches(api, capsys) -> None:
    hard = TrafficTarget(**{**TARGET, "ttft_ms": 100.0})
    choice = choose_card([plan_card("h200", hard, [_config("agg", 2, 2.0, 500, 30)]),
                          plan_card("b200", hard, [_config("agg", 4, 8.0, 400, 20)])])
    assert choice.refusal
    api.answers.append((422, {"error": {"code": "target_unreachable", "message": choice.refusal, "details": {
        "candidates": [c.model_dump(mode="json") for c in choice.candidates]}}}))
    assert _run([*CREATE, *FLAGS, "--api", api.url]) == 2
    err = capsys.readouterr().err
    assert choice.refusal in err
    for candidate in choice.candidates:
        line = next(x for x in err.splitlines() if x.startswith(candidate.plan.card + " "))
        assert candidate.why_not and "TTFT" in candidate.why_not and line.endswith(candidate.why_not), line


def test_without_the_perf_extra_the_answer_says_so(api, capsys) -> None:
    api.answers.append((503, {"error": {"code": "perf_unavailable", "message": NOT_INSTALLED}}))
    assert _run([*CREATE, *FLAGS, "--dry-run", "--api", api.url]) == 1
    assert NOT_INSTALLED in capsys.readouterr().err


STATUS = "/v1/workloads/plans/ticket"


def _planning(searching: str | None = None, planned: list[str] | None = None) -> dict:
    progress = {"state": "searching" if searching else "starting", "planned": planned or [], "searching": searching,
                "started_at": None, "seconds": 12.0}
    return {"state": "planning", "status_url": STATUS, "workflow_id": "traffic-plan/abc", "cards": ["h200", "b200"],
            "workflow_url": "http://localhost:8233/namespaces/default/workflows/traffic-plan%2Fabc",
            "progress": progress, "then": "GET the status URL until it answers with the plan"}


@pytest.fixture
def no_pause(monkeypatch) -> None:
    import wingsmith.cli.waiting as waiting
    monkeypatch.setattr(waiting, "LOOK_EVERY_SECONDS", 0.0)


def test_a_plan_under_way_is_followed_with_its_progress_then_printed(api, capsys, no_pause) -> None:
    choice = _choice()
    api.answers += [(202, _planning()), (200, _planning("h200")), (200, _planning("b200", ["h200"])),
                    (200, _dry_run_answer(choice))]
    assert _run([*CREATE, *FLAGS, "--dry-run", "--api", api.url]) == 0
    assert [(method, path) for method, path, _ in api.requests] == [
        ("POST", "/v1/workloads"), ("GET", STATUS), ("GET", STATUS), ("GET", STATUS)]
    printed = capsys.readouterr()
    assert "planning on h200, b200: workflow traffic-plan/abc" in printed.err
    assert "searching h200 (0 of 2 cards planned), 12 s" in printed.err
    assert "searching b200 (1 of 2 cards planned: h200), 12 s" in printed.err
    assert choice.chosen is not None and f"chosen: {choice.chosen.card}" in printed.out


def test_a_create_is_sent_again_once_its_plan_is_there(api, capsys, no_pause) -> None:
    plan = _dry_run_answer(_choice())["plan"]
    api.answers += [(202, _planning()), (200, _dry_run_answer(_choice())),
                    (202, {"id": "qwen3-8b", "workflow_id": "workload/qwen3-8b", "workflow_url": "http://ui/w",
                           "plan": plan})]
    assert _run([*CREATE, *FLAGS, "--api", api.url]) == 0
    assert [(method, path) for method, path, _ in api.requests] == [
        ("POST", "/v1/workloads"), ("GET", STATUS), ("POST", "/v1/workloads")]
    assert api.requests[0][2] == api.requests[2][2] and not api.requests[2][2]["dry_run"]
    assert "workload        qwen3-8b" in capsys.readouterr().out


def test_detach_prints_where_to_follow_the_plan(api, capsys) -> None:
    api.answers.append((202, _planning()))
    assert _run([*CREATE, *FLAGS, "--dry-run", "--detach", "--api", api.url]) == 0
    assert len(api.requests) == 1
    out = capsys.readouterr().out
    assert f"status    {STATUS}" in out and "traffic-plan%2Fabc" in out

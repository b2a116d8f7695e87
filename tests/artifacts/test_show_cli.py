"""`wingsmith artifacts show` of a draft the watch opened names what moved since the approved one."""

import pytest

import wingsmith.cli.api_client as api_client
from wingsmith.cli.main import build_parser

DRAFT = {"id": "org/m@bbb", "state": "draft", "requested_by": "watch org/m@main", "workflow_url": "http://ui",
         "draft": {"version": 1, "catalog_version": "c1", "evidence": {}, "sizing": {}, "warnings": []},
         "review": None}


@pytest.mark.parametrize(("diff", "line"), [
    ({"against": "org/m@aaa", "changed": ["config.max_position_embeddings", "flag.--max-num-seqs"]},
     "changed       config.max_position_embeddings, flag.--max-num-seqs"),
    ({"against": "org/m@aaa", "changed": []}, "changed       nothing the plane reads"),
])
def test_show_names_the_changed_keys(monkeypatch, capsys, diff, line) -> None:
    monkeypatch.setattr(api_client, "request", lambda *a, **k: (0, DRAFT | {"diff": diff}))
    args = build_parser().parse_args(["artifacts", "show", "org/m@bbb"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert line in out and "against       org/m@aaa" in out, out


def test_show_without_a_diff_has_no_changed_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(api_client, "request", lambda *a, **k: (0, DRAFT | {"diff": None}))
    args = build_parser().parse_args(["artifacts", "show", "org/m@bbb"])
    assert args.func(args) == 0
    assert "changed" not in capsys.readouterr().out


def test_show_says_what_the_draft_is_sized_on_and_why(monkeypatch, capsys) -> None:
    reason = "verified by the recipe, which the registered clusters have"
    sized = DRAFT | {"diff": None, "draft": DRAFT["draft"] | {"sizing": {"target": {
        "hardware": "h200", "layout": "single_node_tp", "gpus": 8, "reason": reason}, "sizing": []}}}
    monkeypatch.setattr(api_client, "request", lambda *a, **k: (0, sized))
    args = build_parser().parse_args(["artifacts", "show", "org/m@bbb"])
    assert args.func(args) == 0
    assert f"sized on      8 × h200 single_node_tp: {reason}" in capsys.readouterr().out

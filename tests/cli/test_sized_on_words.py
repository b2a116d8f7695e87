"""`wingsmith artifacts show` says which shape a draft is sized on in sentences (issue 52: "…16 GPU(s) on
2 node(s) variant default needs 1680 GB…" ran the shape, the floor and the fallback into one clause). The
draft is Kimi-K3's as the plane builds it from the shipped catalog, sized for a fleet of H200 (one node of
8 × H200 is below the default variant's 1,680 GB floor, so the draft takes the recipe's two-node shape)."""

from __future__ import annotations

import re

import wingsmith.cli.api_client as api_client
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.cli.main import build_parser
from wingsmith.domain.drafts import sizing_target
from wingsmith.domain.recipes import evidence_for

KIMI = "moonshotai/Kimi-K3"


def _shown(monkeypatch, capsys, target: dict) -> str:
    answer = {"id": f"{KIMI}@{'a' * 40}", "state": "draft", "requested_by": "olga",
              "draft": {"version": 1, "catalog_version": "test", "sizing": {"target": target}}}
    monkeypatch.setattr(api_client, "request", lambda *a, **kw: (0, answer))
    args = build_parser().parse_args(["artifacts", "show", answer["id"]])
    assert args.func(args) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sized on")]
    return " ".join(line.split())


def test_a_two_node_shape_is_said_in_sentences(monkeypatch, capsys):
    catalog = load_catalog()
    target = sizing_target(evidence_for(catalog.find(KIMI), catalog), fleet_cards=["h200"])
    assert (target.hardware, target.layout, target.gpus) == ("h200", "multi_node_tp", 16)
    line = _shown(monkeypatch, capsys, target.model_dump(mode="json"))
    assert line.startswith("sized on 16 × h200 multi_node_tp: the recipe's multi_node_tp shape, 16 GPU(s) on "
                           "2 node(s), on verified H200, which the registered clusters have. On one node: variant "
                           "default needs 1680 GB for one replica"), line
    assert not re.search(r"node\(s\) variant", line), "the shape and the floor run together"
    # Each part is a sentence of its own: the shape, why one node is not enough, how the count was chosen.
    sentences = [s for s in re.split(r"(?<=[.)]) (?=[A-Z])", line.split(": ", 1)[1]) if s]
    assert len(sentences) == 3, sentences
    assert sentences[1].startswith("On one node: variant default needs") and "below its floor" in sentences[1]
    assert sentences[2].startswith("Its GPU count: the fewest whole h200 nodes"), sentences
    assert "shape instead" not in line and line.endswith("2 node(s).")


def test_a_one_node_shape_says_it_runs_as_the_recipe_runs_it(monkeypatch, capsys):
    catalog = load_catalog()
    target = sizing_target(evidence_for(catalog.find(KIMI), catalog))
    line = _shown(monkeypatch, capsys, target.model_dump(mode="json"))
    assert ("the recipe's default layout, 8 GPU(s) on 1 node(s) as the recipe runs it, on verified B300. Its GPU "
            "count: the smallest shape on b300 that holds the variant's floor of 1680 GB") in line, line

"""The model index (issue 37): every recipe, with search and filters by card, task, size and layout as
query parameters (no script needed); each filter keeps exactly the recipes whose facts match, computed
here from the catalog, and a value the catalog does not know is refused by name."""

from __future__ import annotations

import re
from html import unescape

import pytest

from console.model_index import size_bucket
from wingsmith.adapters.recipes.files import load_catalog
from wingsmith.domain.recipes import evidence_for


def listed(html: str) -> set[str]:
    return set(re.findall(r'<tr data-model="([^"]+)"', html))


def _layouts(recipe, catalog) -> set[str]:
    return {lay.name for lay in evidence_for(catalog.find(recipe.model_id), catalog).layouts if lay.allowed}


async def test_no_filter_lists_every_recipe_with_its_link(anon):
    catalog = load_catalog()
    r = await anon.get("/console/models")
    assert r.status_code == 200
    assert listed(r.text) == {rec.model_id for rec in catalog.recipes.values()}
    assert f"{len(catalog.recipes)} of {len(catalog.recipes)} models" in r.text
    for rec in catalog.recipes.values():
        assert f'href="/console/models/{rec.path}"' in r.text


@pytest.mark.parametrize("field,value", [("card", "gb200"), ("card", "mi355x"), ("task", "multimodal"),
                                         ("task", "omni"), ("size", "huge"), ("size", "small"),
                                         ("layout", "pd_cluster"), ("layout", "multi_node_tp_dp")])
async def test_each_filter_keeps_exactly_the_matching_recipes(anon, field, value):
    catalog = load_catalog()
    facts = {
        "card": lambda rec: value in rec.hardware and rec.hardware[value] in ("verified", "supported"),
        "task": lambda rec: value in rec.tasks,
        "size": lambda rec: size_bucket(rec.parameter_count) == value,
        "layout": lambda rec: value in _layouts(rec, catalog),
    }
    expected = {rec.model_id for rec in catalog.recipes.values() if facts[field](rec)}
    assert expected and len(expected) < len(catalog.recipes), "a filter worth testing keeps some, not all"
    r = await anon.get("/console/models", params={field: value})
    assert r.status_code == 200
    assert listed(r.text) == expected
    assert re.search(rf'<option value="{value}" selected>', r.text), "the form shows the filter in force"


async def test_search_and_filters_combine(anon):
    r = await anon.get("/console/models", params={"q": "kimi k3", "card": "h200", "layout": "multi_node_tp_dp"})
    assert listed(r.text) == {"moonshotai/Kimi-K3"}
    none = await anon.get("/console/models", params={"q": "no model is called this"})
    assert listed(none.text) == set() and 'id="no-models"' in none.text


def test_sizes_read_the_recipe_words():
    assert [size_bucket(s) for s in ("230M", "8B", "1.2B", "32B", "235B", "2.8T", "Undisclosed", None)] == \
        ["small", "small", "small", "medium", "large", "huge", "unstated", "unstated"]


@pytest.mark.parametrize("params,named", [({"card": "<b>tpu</b>"}, "card"), ({"layout": "sideways"}, "layout"),
                                          ({"size": "xl"}, "size"), ({"task": "dance"}, "task"),
                                          ({"q": "x" * 201}, "at most 200")])
async def test_unknown_filter_values_are_refused_by_name(anon, params, named):
    r = await anon.get("/console/models", params=params)
    assert r.status_code == 422
    assert named in unescape(r.text) and "<b>tpu</b>" not in r.text

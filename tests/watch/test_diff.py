"""The draft diff's serve-command lines and the catalog trigger's test, on the shipped catalog and a
local edit of one recipe (`wingsmith recipes edit`): real recipes, real command synthesis."""

from __future__ import annotations

from typing import Any

from wingsmith.adapters.recipes.files import catalog_in_force, load_catalog, put_in_force
from wingsmith.domain.drafts import sizing_target
from wingsmith.domain.recipes import Catalog, evidence_for
from wingsmith.domain.recipes.catalog import edit_recipe
from wingsmith.domain.watch import draft_diff, evidence_moved, flags_of

REPO = "openai/gpt-oss-20b"


def _row(catalog: Catalog, artifact: str) -> dict[str, Any]:
    evidence = evidence_for(catalog.find(REPO), catalog)
    return {"id": artifact, "repo_id": REPO, "proposal": {"config": {"a": 1}, "weight_bytes": 10},
            "draft": {"catalog_version": catalog.version, "evidence": evidence.model_dump(mode="json"),
                      "sizing": {"target": sizing_target(evidence).model_dump()}}}


def test_flags_of_reads_pairs_equals_and_switches() -> None:
    assert flags_of(["--tp", "2", "--x=1", "--trust-remote-code", "--tp", "4"]) == \
        {"--tp": "4", "--x": "1", "--trust-remote-code": None}


def test_a_recipe_edit_shows_flags_max_num_seqs_and_evidence() -> None:
    shipped = load_catalog()
    recipe = shipped.find(REPO).recipe
    # A lower floor: a higher one could put some cards' shapes below it, and move the layouts offered too.
    floor = round(recipe.variants["default"].vram_minimum_gb * 0.9, 1)
    edited = edit_recipe(shipped, REPO, {"base_args": [*recipe.base_args, "--max-num-seqs", "64"],
                                         "variants.default.vram_minimum_gb": floor})
    assert edited.version != shipped.version and edited.version.split(".")[:2] == shipped.version.split(".")[:2]
    old, new = _row(shipped, f"{REPO}@a"), _row(edited, f"{REPO}@a+x")
    diff = draft_diff(old, new, (shipped, edited))
    assert diff["command"]["flags"] == [{"flag": "--max-num-seqs", "approved": None, "new": "64"}], diff["command"]
    seqs = diff["command"]["max_num_seqs"]
    assert seqs["new"] == 64 and seqs["approved"] != 64 and "sets it" in seqs["new_source"]
    assert [v["name"] for v in diff["variants"]] == ["default"]
    assert diff["variants"][0]["new"]["vram_minimum_gb"] == floor
    assert diff["changed"] == ["catalog_version", "flag.--max-num-seqs", "max_num_seqs", "variant.default"]
    assert evidence_moved(REPO, old, shipped, edited)
    assert not evidence_moved(REPO, old, shipped, shipped)
    # Without the approved side's catalog the command lines say so instead of guessing.
    blind = draft_diff(old, new, (None, edited))
    assert blind["command"]["errors"]["approved"] and not blind["command"]["flags"]


def test_a_flag_only_edit_is_an_evidence_change_for_the_watch() -> None:
    shipped = load_catalog()
    recipe = shipped.find(REPO).recipe
    edited = edit_recipe(shipped, REPO, {"base_args": [*recipe.base_args, "--enforce-eager"]})
    old = _row(shipped, f"{REPO}@a")
    assert evidence_moved(REPO, old, shipped, edited)  # the evidence itself is equal; the command is not
    assert not evidence_moved(REPO, old, None, edited)  # old catalog not held: only evidence is compared


def test_the_catalog_in_force_is_shipped_until_one_is_put(tmp_path) -> None:
    shipped = load_catalog()
    assert catalog_in_force(tmp_path) is shipped
    edited = edit_recipe(shipped, REPO, {"context_length": 4096})
    put_in_force(edited, tmp_path)
    assert catalog_in_force(tmp_path).version == edited.version
    put_in_force(shipped, tmp_path)
    assert catalog_in_force(tmp_path).version == shipped.version

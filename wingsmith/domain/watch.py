"""The watch on upstream: a Temporal Schedule per approved repository and branch
(`watch/<org>/<name>@<branch>`) that checks where the branch points and, on a new commit, opens a new
draft for review. Its messages are its contract (contracts.watch); here is the rule of what can be
watched, and `draft_diff`: what a new draft changes against the approved artifact."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from wingsmith.domain.recipes import Catalog, InvalidChoice, evidence_for, serve_command
from wingsmith.domain.recipes.command import dedupe_args
from wingsmith.domain.workloads import max_num_seqs_for

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
def watchable(revision: str) -> bool:
    """A branch (or tag) moves; a pinned commit never does, so it has nothing to watch."""
    return not SHA_RE.match(revision)


# --- what a new draft changes -----------------------------------------------------------------------

def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value} if prefix else {}


def config_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """config.json keys (dotted for nested ones) that were added, removed or changed."""
    a, b = _flatten(old), _flatten(new)
    return [{"key": k, "approved": a.get(k), "new": b.get(k)} for k in sorted(a.keys() | b.keys())
            if a.get(k) != b.get(k) or (k in a) != (k in b)]


def _variants(evidence: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {v["name"]: {"precision": v.get("precision"), "vram_minimum_gb": v.get("vram_minimum_gb"),
                        "checkpoint": v.get("checkpoint")} for v in (evidence or {}).get("variants", [])}


# Evidence fields that name where the facts came from rather than what they say: a new catalog build
# changes them even when the model's recipe did not move.
_PROVENANCE = ("catalog_version", "links")


def _keyed(value: Any) -> Any:
    """Lists of named things (variants, layouts, hardware, features) keyed by name, so a diff names
    the one that changed instead of repeating the whole list."""
    if isinstance(value, list) and value and all(isinstance(v, dict) and ("name" in v or "id" in v) for v in value):
        return {str(v.get("name", v.get("id"))): v for v in value}
    return value


def evidence_facts(evidence: dict[str, Any] | None) -> dict[str, Any]:
    """The recipe evidence a reviewer decides on, without its provenance (dotted keys)."""
    return _flatten({k: _keyed(v) for k, v in (evidence or {}).items() if k not in _PROVENANCE})


def evidence_changes(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[dict[str, Any]]:
    a, b = evidence_facts(old), evidence_facts(new)
    return [{"key": k, "approved": a.get(k), "new": b.get(k)} for k in sorted(a.keys() | b.keys())
            if a.get(k) != b.get(k) or (k in a) != (k in b)]


class CommandChoice(BaseModel):
    """The one serve command both sides of a diff are built for: the new draft's sizing target."""
    variant: str
    hardware: str
    layout: str


class CommandSide(BaseModel):
    flags: dict[str, str | None] = Field(default_factory=dict, description="flag -> value (None: a bare switch)")
    max_num_seqs: int | None = None
    max_num_seqs_source: str | None = None
    error: str | None = Field(None, description="why no command could be built from this side's catalog")


def flags_of(args: list[str]) -> dict[str, str | None]:
    """`--flag value`, `--flag=value` and bare `--switch` tokens as one mapping (the last one wins)."""
    out: dict[str, str | None] = {}
    for token in dedupe_args(args):
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            out[name] = value if eq else None
        elif out:
            out[next(reversed(out))] = token
    return out


def command_side(repo_id: str, evidence: dict[str, Any] | None, catalog: Catalog | None,
                 choice: CommandChoice) -> CommandSide:
    """The vLLM flags and the Dynamo `--max-num-seqs` the plane would render for `choice` from one
    draft's evidence, read in the catalog that evidence came from."""
    if not evidence:
        return CommandSide(error="no recipe evidence")
    recipe = catalog.recipes.get(evidence["recipe"]) if catalog is not None else None
    if catalog is None or recipe is None:
        return CommandSide(error="the recipe catalog this evidence came from is not held here")
    try:
        command = serve_command(recipe, choice.variant, choice.hardware, choice.layout, [], catalog=catalog)
    except (InvalidChoice, LookupError) as exc:
        return CommandSide(error=str(exc).strip("'\""))
    seqs, source = max_num_seqs_for(command, repo_id, command.hardware, catalog)
    return CommandSide(flags=flags_of(command.args), max_num_seqs=seqs, max_num_seqs_source=source)


def diff_choice(new: dict[str, Any]) -> CommandChoice | None:
    draft = new.get("draft") or {}
    evidence, target = draft.get("evidence") or {}, (draft.get("sizing") or {}).get("target") or {}
    if not evidence or not evidence.get("default_layout") or not target:
        return None
    return CommandChoice(variant=evidence.get("default_variant") or "default", hardware=target["hardware"],
                         layout=target["layout"])


def command_changes(approved: CommandSide, new: CommandSide) -> list[dict[str, Any]]:
    """Flags added, removed or changed; a bare switch shows as true, an absent flag as null."""
    def shown(side: CommandSide, flag: str) -> Any:
        return (side.flags[flag] if side.flags[flag] is not None else True) if flag in side.flags else None
    return [{"flag": f, "approved": shown(approved, f), "new": shown(new, f)}
            for f in sorted(approved.flags.keys() | new.flags.keys()) if shown(approved, f) != shown(new, f)]


def draft_diff(approved: dict[str, Any], new: dict[str, Any],
               catalogs: tuple[Catalog | None, Catalog | None] = (None, None)) -> dict[str, Any]:
    """What a draft (registry row with its latest draft) changes against the approved artifact: config
    fields, weight bytes, variants and their published floors, the rest of the recipe evidence, the
    recipe catalog, and, given the catalogs each side's evidence came from, the serve-command flags and
    the Dynamo `--max-num-seqs` the plane would render for the new draft's sizing target."""
    old_p, new_p = approved.get("proposal") or {}, new.get("proposal") or {}
    old_d, new_d = approved.get("draft") or {}, new.get("draft") or {}
    old_v, new_v = _variants(old_d.get("evidence")), _variants(new_d.get("evidence"))
    variants = [{"name": n, "approved": old_v.get(n), "new": new_v.get(n)}
                for n in sorted(old_v.keys() | new_v.keys()) if old_v.get(n) != new_v.get(n)]
    evidence = [c for c in evidence_changes(old_d.get("evidence"), new_d.get("evidence"))
                if not c["key"].startswith("variants")]  # variants have their own rows
    out: dict[str, Any] = {
        "against": approved["id"],
        "config": config_changes(old_p.get("config") or {}, new_p.get("config") or {}),
        "weight_bytes": {"approved": old_p.get("weight_bytes"), "new": new_p.get("weight_bytes")},
        "variants": variants,
        "evidence": evidence,
        "catalog_version": {"approved": old_d.get("catalog_version"), "new": new_d.get("catalog_version")},
        "command": None,
    }
    choice = diff_choice(new)
    if choice is not None:
        repo = new.get("repo_id") or approved.get("repo_id") or ""
        a = command_side(repo, old_d.get("evidence"), catalogs[0], choice)
        b = command_side(repo, new_d.get("evidence"), catalogs[1], choice)
        both = a.error is None and b.error is None  # one side missing: no line rather than a false one
        out["command"] = {
            "choice": choice.model_dump(), "flags": command_changes(a, b) if both else [],
            "max_num_seqs": {"approved": a.max_num_seqs, "new": b.max_num_seqs,
                             "approved_source": a.max_num_seqs_source, "new_source": b.max_num_seqs_source},
            "errors": {"approved": a.error, "new": b.error}}
    command = out["command"] or {}
    seqs = command.get("max_num_seqs") or {}
    out["changed"] = sorted(
        [f"config.{c['key']}" for c in out["config"]]
        + (["weight_bytes"] if old_p.get("weight_bytes") != new_p.get("weight_bytes") else [])
        + [f"variant.{v['name']}" for v in variants]
        + [f"evidence.{c['key']}" for c in evidence]
        + [f"flag.{c['flag']}" for c in command.get("flags", [])]
        + (["max_num_seqs"] if command and not any(command["errors"].values())
           and seqs["approved"] != seqs["new"] else [])
        + (["catalog_version"] if old_d.get("catalog_version") != new_d.get("catalog_version") else []))
    return out


def evidence_moved(repo_id: str, approved: dict[str, Any], approved_catalog: Catalog | None,
                   catalog: Catalog) -> bool:
    """Whether `catalog` says something else about this model than the approved draft did: its recipe
    evidence, or the serve-command flags and `--max-num-seqs` the plane would render for the approved
    draft's sizing target (a changed base flag is not part of the evidence but changes what runs)."""
    draft = approved.get("draft") or {}
    match = catalog.find(repo_id)
    now = evidence_for(match, catalog).model_dump(mode="json") if match else None
    if evidence_facts(draft.get("evidence") or None) != evidence_facts(now):
        return True
    choice = diff_choice(approved)
    if choice is None or approved_catalog is None:
        return False
    before, after = (command_side(repo_id, draft.get("evidence"), approved_catalog, choice),
                     command_side(repo_id, now, catalog, choice))
    return (before.flags, before.max_num_seqs) != (after.flags, after.max_num_seqs)

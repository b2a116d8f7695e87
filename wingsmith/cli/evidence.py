"""The recipe evidence and the plane's sizing as the CLI prints them, one row each: the same rows for a
draft (`wingsmith artifacts show`) and for a proposal (`wingsmith resolve`, which writes nothing)."""

from __future__ import annotations

from typing import Any


def evidence_rows(evidence: dict | None) -> list[tuple[str, Any]]:
    """Each precision variant with the floor the recipe publishes for the whole replica."""
    return [(f"variant {v['name']}", f"{v['precision']}, published floor {v['vram_minimum_gb']} GB"
                                     + (" (estimate)" if v["is_estimate"] else ""))
            for v in (evidence or {}).get("variants", [])]


def sizing_rows(sizing: dict | None, warnings: list[str]) -> list[tuple[str, Any]]:
    """The card and shape the plane sizes on, its own floor per variant, and its warnings."""
    rows: list[tuple[str, Any]] = []
    if target := (sizing or {}).get("target"):  # the card and shape the fit check is for
        rows.append(("sized on", f"{target['gpus']} × {target['hardware']} {target['layout']}: {target['reason']}"))
    for s in (sizing or {}).get("sizing", []):
        if s.get("report"):
            f = s["report"]["floor"]
            rows.append((f"sizing {s['variant']}", f"our floor {f['ours_gb']} GB ({f['level']})"))
    return rows + [("warning", w) for w in warnings]


def recipe_rows(evidence: dict | None, repo_id: str) -> list[tuple[str, Any]]:
    """Which recipe the evidence comes from, at which commit, and the hardware and layouts it states."""
    if not evidence:
        return [("evidence", f"none: no vLLM recipe in the catalog matches {repo_id}")]
    links = evidence.get("links") or {}
    commit = f" @ {links['commit'][:12]}" if links.get("commit") else ""
    rows: list[tuple[str, Any]] = [("evidence", f"vLLM recipe {evidence['recipe']}{commit}"
                                                + (f" ({links['recipe']})" if links.get("recipe") else ""))]
    hardware = [f"{h['display_name']} ({h['status'].replace('_', ' ')})" for h in evidence.get("hardware", [])]
    if hardware:
        rows.append(("hardware", ", ".join(hardware)))
    layouts = [lay["name"] + (" (default)" if lay.get("default") else "") for lay in evidence.get("layouts", [])]
    if layouts:
        rows.append(("layouts", ", ".join(layouts)))
    return rows

"""Every relative link in the README, docs/ and the measurement history (bench/RESULTS.md) leads somewhere:
the file exists and, when the link names a section (`page.md#anchor`), the page has a heading with that
anchor as GitHub spells it. Docs move as the code grows; a link that silently lands on the top of a page (or
nowhere) is how they rot."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.M)}


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto: lead outside the repository
            continue
        path, _, section = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif section and dest.suffix == ".md" and section not in anchors(dest):
            broken.append(f"{target} (no such section)")
    return broken


def test_anchor_is_spelled_as_github_spells_it():
    assert anchor("Killing replicas: `bench/ha.py`") == "killing-replicas-benchhapy"
    assert anchor("Secured Temporal and Postgres") == "secured-temporal-and-postgres"


def test_a_link_to_a_missing_section_is_found(tmp_path: Path):
    (tmp_path / "a.md").write_text("# Here\n\n[there](b.md#gone) [here](#here) [b](b.md)\n")
    (tmp_path / "b.md").write_text("# B\n")
    assert broken_links(tmp_path / "a.md") == ["b.md#gone (no such section)"]


def test_every_relative_link_of_the_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "RESULTS.md"]
    broken = {str(p.relative_to(ROOT)): b for p in pages if (b := broken_links(p))}
    assert not broken, broken

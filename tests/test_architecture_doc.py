"""docs/architecture.md stays true to the code: what the worker registers and polls, and the packages
the project ships, must each appear in one of its mermaid diagrams. A new workflow, task queue or
top-level package fails here until someone draws it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from wingsmith.config import KUBE_TASK_QUEUE, TASK_QUEUE, observe_task_queue
from worker.registry import workflows

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def diagrams() -> str:
    """The text of every mermaid block of the page (prose mentioning a name does not count)."""
    blocks = re.findall(r"```mermaid\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 3, "processes, workflows and import layers are each a mermaid diagram"
    return "\n".join(blocks)


def _named(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def test_every_registered_workflow_is_drawn():
    drawn = diagrams()
    missing = [wf.__name__ for wf in workflows() if not _named(wf.__name__, drawn)]
    assert not missing, f"workflows the worker registers but docs/architecture.md does not draw: {missing}"


def test_every_task_queue_is_drawn():
    drawn = diagrams()
    queues = [TASK_QUEUE, KUBE_TASK_QUEUE, observe_task_queue(KUBE_TASK_QUEUE)]
    missing = [q for q in queues if not _named(q, drawn)]
    assert not missing, f"task queues the worker polls but docs/architecture.md does not draw: {missing}"


def test_every_package_is_in_the_layers():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    layers = diagrams().split("flowchart")[-1]  # the last diagram is the import layers
    missing = [p for p in packages if not _named(p, layers)]
    assert not missing, f"packages missing from the import-layer diagram of docs/architecture.md: {missing}"


def test_the_readme_links_every_page_of_docs():
    readme = (ROOT / "README.md").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    missing = [p for p in pages if f"docs/{p}" not in readme]
    assert not missing, f"pages of docs/ the README does not link: {missing}"
    assert len(readme.splitlines()) < 300, "the README is the short path; details belong in docs/"

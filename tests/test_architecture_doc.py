"""docs/architecture.md stays true to the code: what the worker registers and polls, and the packages
the project ships, must each appear in one of its mermaid diagrams, and every file or folder its prose names
must exist. A new workflow, task queue or top-level package fails here until someone draws it; a module that
moves fails here until the page names its new place."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from wingsmith.domain.config import KUBE_TASK_QUEUE, TASK_QUEUE, observe_task_queue
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


# A backticked name that is a path: names joined by slashes (`contracts/ids.py`, `api/routes/`), a folder
# (`docs/`) or a file with a suffix (`pyproject.toml`). Module names (`wingsmith.cli`), ids with placeholders
# (`workload/<id>`) and routes (`/v1/models`) are not.
PATH = re.compile(r"[\w.-]+(?:/[\w.-]+)*/|[\w.-]+(?:/[\w.-]+)+|[\w.-]+\.(?:py|md|toml|ya?ml|json|sql|sh|lock)")


def named_paths(text: str) -> set[str]:
    """The files and folders a page's prose names in backticks (the mermaid diagrams are checked above)."""
    prose = re.sub(r"```mermaid\n.*?```", "", text, flags=re.S)
    return {token for token in re.findall(r"`([^`\s]+)`", prose) if PATH.fullmatch(token)}


def test_named_paths_are_the_paths_in_backticks():
    text = ("`worker/registry.py` and `api/routes/`, `docs/`, `pyproject.toml`; not `wingsmith.cli`, "
            "`workload/<id>`, `/v1/models`, `python -m worker.perf` or `WINGSMITH_TASK_QUEUE`\n"
            "```mermaid\nflowchart LR\n  a[`drawn/only.py`]\n```\n")
    assert named_paths(text) == {"worker/registry.py", "api/routes/", "docs/", "pyproject.toml"}


def test_every_path_the_prose_names_exists():
    """Names are repository paths from the root, never relative to a folder named before them."""
    missing = sorted(p for p in named_paths(DOC.read_text()) if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


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
    assert len(readme.splitlines()) < 150, "the README is the short path; details belong in docs/"


def _layer_of(module: str) -> str | None:
    """The node of the import-layer diagram a module belongs to (None: not the product's)."""
    from tests.test_layers import ADAPTERS, DOMAIN, ENTRY_POINTS, PRODUCT
    top = module.split(".")[0]
    if top != "wingsmith":
        return top if top in (*PRODUCT, "sim") else None
    for node, folders in (("domain", DOMAIN), ("adapters", ADAPTERS), ("entry", ENTRY_POINTS)):
        if any(module == f or module.startswith(f + ".") for f in folders):
            return node
    return None


def _drawn_edges() -> set[tuple[str, str]]:
    layers = diagrams().split("flowchart")[-1]
    return set(re.findall(r"^\s*(\w+) -->(?:\|[^|]*\|)? (\w+)\s*$", layers, flags=re.M))


def _reachable(edges: set[tuple[str, str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        here = todo.pop()
        for a, b in edges:
            if a == here and b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def test_the_layer_diagram_draws_every_import_the_code_makes():
    """Each import between layers follows the arrows ("may import", through other layers too), and no arrow
    allows what tests/test_layers.py forbids: the diagram is the layer rule, drawn."""
    from tests.test_layers import FORBIDDEN, imported_modules
    drawn = _drawn_edges()
    undrawn = set()
    from tests.test_layers import PRODUCT
    for package in (*PRODUCT, "sim"):
        for path in sorted((ROOT / package).rglob("*.py")):
            here = _layer_of(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
            for _, module in imported_modules(path):
                there = _layer_of(module)
                if here and there and here != there and there not in _reachable(drawn, here):
                    undrawn.add((here, there, str(path.relative_to(ROOT))))
    assert sorted(undrawn) == []
    node_package = {"domain": "wingsmith", "adapters": "wingsmith", "entry": "wingsmith"}
    allowed_wrongly = [(a, b) for a, b in drawn
                       if node_package.get(b, b) in FORBIDDEN.get(node_package.get(a, a), ())]
    assert allowed_wrongly == []

"""Dependencies point one way (DESIGN.md, issue #20): the core `wingsmith` package imports none of
the layers built on it, workflows and activities import no api/worker/sim, the API imports no
activities/worker/sim, and the stand-ins in sim/ import nothing of the product, so a product mistake
cannot hide in its own stand-in. Every import counts, also those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("wingsmith", "workflows", "activities", "api", "worker")
# package -> top-level packages it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "wingsmith": ("api", "workflows", "activities", "worker", "sim", "tests", "bench"),
    "workflows": ("api", "worker", "sim", "tests", "bench"),
    "activities": ("api", "worker", "sim", "tests", "bench"),
    "api": ("activities", "worker", "sim", "tests", "bench"),
    "sim": (*PRODUCT, "tests", "bench"),
}


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """Every module a file imports, at any depth (functions, `if TYPE_CHECKING`, passed-through blocks)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's own package
                package = path.relative_to(root).parent.parts
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # `from .. import x` names modules in its list, not in `module`
            found += [(node.lineno, module)] if node.module else [
                (node.lineno, f"{module}.{a.name}".lstrip(".")) for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, str(node.args[0].value)))
    return sorted(found)


def violations(package: str, root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path, root):
            top = module.split(".")[0]
            if top in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(root)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    assert violations(package) == []


def test_the_rule_sees_imports_inside_functions(tmp_path: Path) -> None:
    """The scanner itself: an import hidden in a function body or a dynamic import is still found."""
    (tmp_path / "wingsmith" / "local").mkdir(parents=True)
    (tmp_path / "wingsmith" / "local" / "probe.py").write_text(
        "from ..config import Settings\n\ndef f():\n    from workflows.workload import X\n"
        "    import importlib\n    importlib.import_module('api.app')\n    from ... import sim\n")
    assert violations("wingsmith", tmp_path) == ["wingsmith/local/probe.py:4 imports workflows.workload",
                                                 "wingsmith/local/probe.py:6 imports api.app",
                                                 "wingsmith/local/probe.py:7 imports sim"]

"""The repository's Python files read as syntax trees, for the tests that check what the code says (layers,
retry policies, response models)."""

from __future__ import annotations

import ast
from pathlib import Path

_TRIES = 3


def parse(path: Path, filename: str | None = None) -> ast.Module:
    """`ast.parse` of a file. CPython 3.11 keeps the AST constructor's recursion depth where another thread's
    compile can disturb it (python/cpython#106905): a parse while a Temporal worker of the same test process
    imports workflow code into its sandbox can fail with a spurious SystemError ("AST constructor recursion
    depth mismatch"), so it is parsed again; a real syntax error is a SyntaxError and raised at once."""
    source = path.read_text()
    for attempt in range(_TRIES):
        try:
            return ast.parse(source, filename=filename or str(path))
        except SystemError:
            if attempt == _TRIES - 1:
                raise
    raise AssertionError("unreachable")

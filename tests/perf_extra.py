"""The `perf` extra (NVIDIA's AIConfigurator) for the modules that plan by load.

`scripts/test.sh` installs it, and in CI (`CI=true`) a module that needs it fails at collection when it is
missing, never skips. Elsewhere (a developer's venv without the extra) such a module is skipped with how
to get it, so pytest still collects everything else (issue 50)."""

from __future__ import annotations

import os

import pytest

INSTALL = "pip install -e '.[perf]' (or scripts/test.sh, which installs every extra)"
# Set by scripts/test-lowest.sh: that run proves the floors of the other dependencies and goes without the
# extra (pinned, it has no floor to prove), so even in CI its absence is a skip there.
WITHOUT_PERF = "WINGSMITH_TEST_WITHOUT_PERF"


def require_perf_extra() -> None:
    """In a test, or at a module's import (tests/needs_perf_extra.py)."""
    try:
        import aiconfigurator  # noqa: F401
    except ImportError:
        if os.environ.get("CI") and not os.environ.get(WITHOUT_PERF):
            raise
        pytest.skip(f"needs the perf extra (AIConfigurator): {INSTALL}", allow_module_level=True)

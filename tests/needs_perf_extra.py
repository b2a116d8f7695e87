"""Imported by a test module that needs the perf extra: outside CI it skips that module when AIConfigurator is
missing, in CI it fails its collection (tests/perf_extra.py)."""

from tests.perf_extra import require_perf_extra

require_perf_extra()

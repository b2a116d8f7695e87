"""Every retry in the plane has a maximum, and data errors are never retried (issue 46).

A retry policy without `maximum_attempts` retried a config's ZeroDivisionError about twenty times an hour
until Temporal's history limit ended the draft days later. This test fails on any such policy: it reads
every activity call of every workflow (they must take their options from workflows/policies.py), builds
every option set policies.py offers, and checks each retry policy's maximum and its non-retryable types.
"""

from __future__ import annotations

import ast
import inspect
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.common import RetryPolicy

from contracts.data_errors import DATA_ERRORS
from tests.python_source import parse
from tests.test_layers import PRODUCT
from workflows import policies

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "workflows"
ACTIVITY_CALLS = {"execute_activity", "start_activity", "execute_local_activity", "start_local_activity",
                  "execute_activity_method", "start_activity_method", "execute_activity_class",
                  "start_activity_class", "execute_local_activity_method", "start_local_activity_method",
                  "execute_local_activity_class", "start_local_activity_class"}
# Sample arguments for the functions of policies.py that build option sets, by the parameter's type: a new
# function is walked without a change here.
SAMPLES = {"str": "q", "float": 30.0, "int": 3}


def _from_policies(expr: ast.expr) -> bool:
    """`policies.NAME` or `policies.fn(...)`."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    return isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "policies"


def activity_calls() -> list[tuple[Path, ast.Call]]:
    calls = []
    for path in sorted(WORKFLOWS.rglob("*.py")):
        if path.name == "policies.py":
            continue
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ACTIVITY_CALLS:
                calls.append((path, node))
    return calls


def option_sets() -> dict[str, dict]:
    """Every option set policies.py defines or builds, by name."""
    found: dict[str, dict] = {}
    for name, value in vars(policies).items():
        if name.startswith("_"):
            continue
        if isinstance(value, dict) and ("start_to_close_timeout" in value or "schedule_to_close_timeout" in value):
            found[name] = value
        elif inspect.isfunction(value) and value.__module__ == policies.__name__ and name != "retry":
            params = inspect.signature(value).parameters
            flags = [p for p, spec in params.items() if spec.annotation == "bool"]
            for flag in ([True, False] if flags else [None]):
                args = {p: (flag if p in flags else SAMPLES[str(spec.annotation)]) for p, spec in params.items()}
                found[f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"] = value(**args)
    return found


def test_every_activity_call_takes_its_options_from_policies():
    calls = activity_calls()
    assert len(calls) > 30, "the walk found too few activity calls to be looking at the workflows"
    wrong = []
    for path, call in calls:
        spread = [k.value for k in call.keywords if k.arg is None]
        own = [k.arg for k in call.keywords if k.arg in ("retry_policy", "start_to_close_timeout",
                                                          "schedule_to_close_timeout", "heartbeat_timeout")]
        if own or len(spread) != 1 or not _from_policies(spread[0]):
            wrong.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    assert not wrong, f"activity calls not using a policies.py option set: {wrong}"


def test_every_option_set_has_a_bounded_retry_policy_that_never_retries_data_errors():
    sets = option_sets()
    assert {"REGISTRY", "DRAFT_COMPUTE", "HUB_RESOLVE", "ENDPOINT_IO", "PING"} <= set(sets)
    assert any(name.startswith("observe(") for name in sets) and any(name.startswith("rollout_apply(") for name in sets)
    unbounded, retrying_data = [], []
    for name, options in sets.items():
        policy = options.get("retry_policy")
        if not isinstance(policy, RetryPolicy) or policy.maximum_attempts < 1:
            unbounded.append(name)
            continue
        missing = set(DATA_ERRORS) - set(policy.non_retryable_error_types or [])
        if missing:
            retrying_data.append(f"{name}: {sorted(missing)}")
    assert not unbounded, f"option sets whose retries have no maximum: {unbounded}"
    assert not retrying_data, f"option sets that retry data errors: {retrying_data}"


def test_a_look_is_ended_by_its_window_not_by_its_attempts():
    """The observe policy's attempts outlast its schedule-to-close window at the longest interval."""
    for report, silence in ((10.0, 6.0), (10.0, 50.0), (60.0, 300.0)):
        options = policies.observe("q", report, silence)
        policy = options["retry_policy"]
        assert policy.maximum_interval is not None
        window = options["schedule_to_close_timeout"]
        assert policy.maximum_interval * (policy.maximum_attempts - 3) > window, (report, silence)


def test_only_policies_builds_retry_policies():
    """A `RetryPolicy(...)` anywhere else in the product would escape the checks above."""
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = parse(path)
            temporal_names = {alias.asname or alias.name for node in ast.walk(tree)
                              if isinstance(node, ast.ImportFrom) and node.module == "temporalio.common"
                              for alias in node.names if alias.name == "RetryPolicy"}
            for node in ast.walk(tree):
                called = node.func if isinstance(node, ast.Call) else None
                by_name = isinstance(called, ast.Name) and called.id in temporal_names
                by_attr = isinstance(called, ast.Attribute) and called.attr == "RetryPolicy" and \
                    isinstance(called.value, ast.Attribute) and called.value.attr == "common"
                if by_name or by_attr:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found and all(f.startswith("workflows/policies.py") for f in found), found


def test_retry_refuses_a_policy_without_a_maximum():
    with pytest.raises(ValueError, match="maximum"):
        policies.retry(attempts=0)
    policy = policies.retry(attempts=4, initial=timedelta(seconds=2), final=["Gone"])
    assert policy.maximum_attempts == 4 and policy.non_retryable_error_types[0] == "Gone"
    assert set(DATA_ERRORS) <= set(policy.non_retryable_error_types)

"""When the cluster says a DGD's fault happened (issue 34: a heal counts from the fault, not only from
when the plane saw it): the deletionTimestamp of an object being deleted, else the newest time a spec
writer changed it; status writes (the operator's) do not count."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from wingsmith.domain.reconcile import read_observation

AT = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)


def _entry(manager: str, time: str, fields: dict, subresource: str | None = None) -> dict:
    entry = {"manager": manager, "operation": "Update", "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields}
    return entry | ({"subresource": subresource} if subresource else {})


APPLIED = _entry("wingsmith", "2026-12-02T06:50:00Z", {"f:spec": {}})
EDITED = _entry("kubectl-edit", "2026-12-02T06:55:10Z", {"f:spec": {"f:env": {}}})
STATUS = _entry("dynamo-operator", "2026-12-02T06:58:00Z", {"f:status": {}}, "status")
STATUS_UNMARKED = _entry("dynamo-operator", "2026-12-02T06:59:00Z", {"f:status": {}})


@pytest.mark.parametrize(("meta", "want"), [
    ({"managedFields": [APPLIED]}, "2026-12-02T06:50:00+00:00"),
    ({"managedFields": [APPLIED, EDITED, STATUS, STATUS_UNMARKED]}, "2026-12-02T06:55:10+00:00"),
    ({"managedFields": [APPLIED, EDITED], "deletionTimestamp": "2026-12-02T06:57:03Z"}, "2026-12-02T06:57:03+00:00"),
    ({"managedFields": [STATUS]}, None),
    ({"managedFields": [_entry("x", "not a time", {"f:spec": {}})]}, None),
    ({}, None),
])
def test_the_fault_time_is_the_clusters_own(meta, want):
    seen = read_observation("sim-east", AT, {"metadata": {"name": "d", "generation": 2, **meta}, "spec": {}})
    assert seen.changed_at == (datetime.fromisoformat(want) if want else None)


def test_a_missing_object_has_no_fault_time():
    assert read_observation("sim-east", AT, None).changed_at is None


# How a heal says its time from the fault (workflows/workload/heal.py): exact when the cluster stamped the
# fault, "at most" the time since the last look that found the DGD well when it could not (a DGD gone).
LAST_OK = datetime(2026, 12, 2, 6, 59, 50, tzinfo=UTC)
SERVED = datetime(2026, 12, 2, 7, 0, 9, tzinfo=UTC)


def test_a_stamped_fault_counts_from_its_own_time():
    from workflows.workload.heal import _from_fault
    words = _from_fault(SERVED, AT, datetime(2026, 12, 2, 6, 59, 58, tzinfo=UTC), None)
    assert words.startswith("11.0 s from the fault (06:59:58 UTC"), words


def test_a_dgd_gone_counts_at_most_from_the_last_look_that_found_it_well():
    from workflows.workload.heal import _from_fault, _not_after
    fault_after = _not_after(LAST_OK, AT)
    assert fault_after == LAST_OK <= AT <= SERVED
    words = _from_fault(SERVED, AT, None, fault_after)
    assert words.startswith("from the fault at most 19.0 s (it happened between 06:59:50 UTC"), words
    assert "and 07:00:00 UTC" in words
    # Two clocks (the look's, the workflow's) never put the last good look after the one that saw the fault.
    assert _not_after(datetime(2026, 12, 2, 7, 0, 1, tzinfo=UTC), AT) == AT
    assert _not_after(None, AT) is None
    assert "unknown" in _from_fault(SERVED, AT, None, None)

"""A worker started without DATABASE_URL: its registry activities say so, they do not fail on None."""

import pytest
from temporalio.exceptions import ApplicationError

from activities.upgrade import UpgradeActivities
from activities.workload import WorkloadActivities
from wingsmith.domain.config import Settings


def test_activities_without_a_database_name_what_is_missing() -> None:
    for activities in (WorkloadActivities(None), UpgradeActivities(Settings(), None)):
        with pytest.raises(ApplicationError, match="DATABASE_URL") as err:
            activities._pool()
        assert err.value.type == "NoDatabase"

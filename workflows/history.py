"""When a long-lived entity workflow continues as new: when the server suggests it (history length
or size near its limits), or past a history limit given in the input. That limit exists for tests,
which cannot grow a history to the server's thresholds; production leaves it unset."""

from __future__ import annotations

from temporalio import workflow


def time_to_continue_as_new(history_limit: int | None) -> bool:
    info = workflow.info()
    if info.is_continue_as_new_suggested():
        return True
    return history_limit is not None and info.get_current_history_length() >= history_limit

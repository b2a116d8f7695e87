"""What the API answers when sending a workload update goes wrong: never a 500."""

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from api.services.workloads import update_error as _update_error


def test_an_update_temporal_did_not_answer_in_time_is_503_and_says_it_may_still_happen() -> None:
    # Seen in the chaos run: a DELETE whose update call timed out under load answered 500.
    err = _update_error(WorkflowUpdateRPCTimeoutOrCancelledError(), "w")
    assert err.status == 503
    assert "may still take effect" in err.message


def test_an_unknown_workload_is_404_and_other_rpc_failures_503() -> None:
    assert _update_error(RPCError("gone", RPCStatusCode.NOT_FOUND, b""), "w").status == 404
    assert _update_error(RPCError("down", RPCStatusCode.UNAVAILABLE, b""), "w").status == 503

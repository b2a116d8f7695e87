"""The workload workflow (`workload/<id>`), in modules by job: workflow.py holds the handlers and the
main loop; state.py the workload it works on; cluster_ops.py what it does to clusters and endpoints;
converge.py, observe.py, heal.py, teardown.py and upgrade.py the rest (see workflow.py)."""

from workflows.workload.workflow import WorkloadWorkflow

__all__ = ["WorkloadWorkflow"]

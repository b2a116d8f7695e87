"""The chaos run, small: the same code and checks as bench/chaos.py, with four workloads, one
worker SIGKILL early in the rollouts, one Postgres restart, Hub 429s and cluster 500s/409s/latency;
then a DGD deleted and one edited by hand, one edited and deleted while the plane re-applies it, under
chat load (no client request may fail), sim-east unreachable for longer than a (short) grace, so
its workloads move and their old DGDs go when it answers, and a restart of the whole plane.
Starts its own Postgres, Temporal, Hub, clusters and gateway (it restarts Postgres, so it cannot
share the session's)."""

from __future__ import annotations

from tests.chaos.harness import ChaosConfig, run_chaos


def test_a_small_chaos_run_loses_nothing(tmp_path):
    config = ChaosConfig(workloads=4, workloads_per_endpoint=2, kill_every=(1.0, 2.0), max_kills=1,
                         operator_delay=1.5, postgres_down_seconds=2.0, api_error_rate=0.2, latency=0.05,
                         hub_rate_limits=3, settle_timeout=120, root=tmp_path, verbose=False,
                         out_of_band_deletes=1, out_of_band_edits=1, unreachable_seconds=10, drift_grace_seconds=5,
                         watch_status_seconds=1.0, watch_probe_seconds=2.0)
    report = run_chaos(config)
    print("\n".join(report.lines()))
    assert report.lost == []
    assert report.serving == 4 and report.failed == 1  # the doomed one, which cannot be placed
    assert "chaos-doomed" in report.failures and "placed 0 of 1" in report.failures["chaos-doomed"]
    # The faults really happened: otherwise the run proves nothing.
    assert report.worker_kills == 1 and report.worker_restarts_survived == 1
    assert report.postgres_restarts == 1
    assert report.scaled == 1  # up to 2 and back, the scale-down draining at its endpoint
    assert report.hub_rate_limited_answers == 3
    assert report.cluster_faults_injected.get("api_error", 0) > 0
    assert report.out_of_band["dgd deleted"] == report.out_of_band["dgd edited"] == 1
    assert report.out_of_band["plane restarts"] == 1
    assert len(report.heal_seconds["dgd deleted/edited"]) == 2
    # Issue 34: an edit then a delete 2 s later, under chat load, heals with no failed client request.
    assert report.out_of_band["dgd edited then deleted"] == 1
    sent, failed = report.overlap_requests
    assert sent > 0 and failed == 0, report.overlap_requests
    # ... and the delete really overlapped: it landed while the plane's re-apply waited for readiness.
    assert report.overlap_delete_during_reapply is True, report.overlap_delete_after_edit_seconds
    assert len(report.heal_seconds["plane restart (to serving)"]) == 4

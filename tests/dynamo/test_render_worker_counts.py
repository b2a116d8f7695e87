"""Workers per replica: a disaggregated replica may run several prefill workers per decode worker, and the
DGD's components count every worker of the cluster's replicas (replicas × workers per replica)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.dynamo.builders import small_spec, validate_dgd
from wingsmith.domain.dynamo import Layout, WorkerPool, render_dgd

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _pd(replicas: int, prefill_workers: int, decode_workers: int):
    prefill = WorkerPool(args=["--tensor-parallel-size", "2", "--max-num-seqs", "1", "--kv-transfer-config", KV],
                         gpus_per_node=2, replicas=replicas, workers_per_replica=prefill_workers)
    decode = WorkerPool(args=["--tensor-parallel-size", "4", "--kv-transfer-config", KV], gpus_per_node=4,
                        replicas=replicas, workers_per_replica=decode_workers)
    return small_spec(layout=Layout.pd_cluster, worker=decode, prefill=prefill, max_num_seqs=84)


def _component(dgd, kind: str) -> dict:
    return next(c for c in dgd["spec"]["components"] if c["type"] == kind)


@pytest.mark.parametrize(("replicas", "prefill_workers", "decode_workers"), [(1, 1, 1), (4, 2, 1), (3, 4, 1),
                                                                              (2, 1, 3), (0, 2, 1)])
def test_each_component_counts_every_worker_of_the_cluster_s_replicas(replicas, prefill_workers, decode_workers):
    dgd = render_dgd(_pd(replicas, prefill_workers, decode_workers))
    validate_dgd(dgd)
    assert _component(dgd, "prefill")["replicas"] == replicas * prefill_workers
    assert _component(dgd, "decode")["replicas"] == replicas * decode_workers
    assert _component(dgd, "frontend")["replicas"] == 1


def test_each_pool_keeps_its_own_arguments_and_role():
    dgd = render_dgd(_pd(2, 2, 1))
    prefill, decode = (_component(dgd, kind)["podTemplate"]["spec"]["containers"][0] for kind in ("prefill", "decode"))
    assert prefill["args"][-2:] == ["--disaggregation-mode", "prefill"]
    assert decode["args"][-2:] == ["--disaggregation-mode", "decode"]
    # Only the decode side carries the plan's named --max-num-seqs; the prefill side keeps its own.
    assert prefill["args"][prefill["args"].index("--max-num-seqs") + 1] == "1"
    assert decode["args"][decode["args"].index("--max-num-seqs") + 1] == "84"
    assert (prefill["resources"]["limits"]["nvidia.com/gpu"], decode["resources"]["limits"]["nvidia.com/gpu"]) == (
        "2", "4")


def test_an_aggregated_worker_is_one_per_replica_as_before():
    spec = small_spec(worker=WorkerPool(args=["--tensor-parallel-size", "1"], gpus_per_node=1, replicas=3))
    assert _component(render_dgd(spec), "worker")["replicas"] == 3


@pytest.mark.parametrize("bad", [0, -1, 257])
def test_workers_per_replica_is_bounded(bad):
    with pytest.raises(ValidationError, match="workers_per_replica"):
        WorkerPool(args=[], gpus_per_node=1, workers_per_replica=bad)

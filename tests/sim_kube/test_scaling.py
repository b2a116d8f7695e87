"""A re-apply that only changes a component's replica count scales it, as Dynamo's operator does:
the replica count is left out of the worker spec hash, so no rolling update starts, the existing
pods (frontend and workers) keep running and the frontend keeps serving while the new replica starts."""

from __future__ import annotations

import threading

import httpx

from sim.kube import LABEL_COMPONENT, LABEL_DGD
from tests.sim_kube.kit import apply, dgd, get, ready_for, wait_for


def _uids(sim, namespace: str, name: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"]
            for p in sim.cluster("sim-east").pods(namespace, f"{LABEL_DGD}={name}")}


def test_scaling_a_serving_deployment_keeps_its_frontend_serving(sim, custom, namespace):
    apply(custom, namespace, dgd("scaled", replicas=1))
    wait_for(lambda: ready_for(get(custom, namespace, "scaled"), 1), what="generation 1 ready")
    before = _uids(sim, namespace, "scaled")
    url = sim.cluster("sim-east").frontend_url(namespace, "scaled")
    body = {"model": "acme/Tiny-1B", "messages": [{"role": "user", "content": "still there?"}]}
    answers: list[int] = []
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(timeout=5) as http:
            while not stop.is_set():
                answers.append(http.post(f"{url}/v1/chat/completions", json=body).status_code)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        wait_for(lambda: len(answers) >= 5, what="requests flowing before the scale")
        apply(custom, namespace, dgd("scaled", replicas=2))
        scaled = wait_for(lambda: (o := get(custom, namespace, "scaled")) and ready_for(o, 2) and o,
                          what="generation 2 ready with two workers")
        during = len(answers)
        wait_for(lambda: len(answers) >= during + 5, what="requests after the scale")
    finally:
        stop.set()
        loader.join()

    assert scaled["status"]["components"]["VllmWorker"]["readyReplicas"] == 2
    failed = [code for code in answers if code != 200]
    assert not failed, f"{len(failed)} of {len(answers)} requests failed during the scale: {sorted(set(failed))}"
    after = _uids(sim, namespace, "scaled")
    assert {n: u for n, u in after.items() if n in before} == before  # nothing replaced, one worker added
    workers = sim.cluster("sim-east").pods(namespace, f"{LABEL_DGD}=scaled,{LABEL_COMPONENT}=VllmWorker")
    assert len(workers) == 2 and len(after) == len(before) + 1

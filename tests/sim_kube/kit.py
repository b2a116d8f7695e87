"""Helpers for the emulator tests: a small DGD and the calls the rollout code makes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

GROUP, VERSION, PLURAL = "nvidia.com", "v1beta1", "dynamographdeployments"


def dgd(name: str, *, model: str = "acme/Tiny-1B", gpus: int = 2, replicas: int = 1, node_count: int = 1,
        product: str = "NVIDIA-H200", labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A small v1beta1 DGD shaped like the upstream recipes (frontend + one vLLM worker)."""
    worker: dict[str, Any] = {
        "name": "VllmWorker", "type": "worker", "replicas": replicas,
        "podTemplate": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": product}, "containers": [{
            "name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0",
            "command": ["/bin/sh", "-c"],
            "args": [f"python3 -m dynamo.vllm --model $MODEL_PATH --served-model-name {model} "
                     f"--tensor-parallel-size {gpus}"],
            "env": [{"name": "MODEL_PATH", "value": "/models/tiny"}],
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}},
        }]}},
    }
    if node_count > 1:
        worker["multinode"] = {"nodeCount": node_count}
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "DynamoGraphDeployment",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {"backendFramework": "vllm", "components": [
            {"name": "Frontend", "type": "frontend", "replicas": 1, "podTemplate": {"spec": {"containers": [
                {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0"}]}}},
            worker,
        ]},
    }


def apply(custom: client.CustomObjectsApi, namespace: str, body: dict[str, Any], manager: str = "wingsmith",
          force: bool = True) -> None:
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body["metadata"]["name"], body,
                                          field_manager=manager, force=force,
                                          _content_type="application/apply-patch+yaml")


def get(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def replace(custom: client.CustomObjectsApi, namespace: str, name: str,
            change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Read-modify-write, retrying on 409 as every controller does: the simulated operator writes
    finalizers, annotations and status concurrently, exactly like the real one."""
    from kubernetes.client.exceptions import ApiException
    for _ in range(50):
        obj = get(custom, namespace, name)
        change(obj)
        try:
            return custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise AssertionError("replace kept conflicting")


def wait_for(check: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def ready_for(obj: dict[str, Any], generation: int) -> bool:
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    return (status.get("state") == "successful" and ready.get("status") == "True"
            and status.get("observedGeneration") == generation)

"""Kubernetes API clients built from a kubeconfig *reference*, at call time.

Workflows and activity inputs carry only where the kubeconfig lives (a file path and a context
name), never its contents or credentials; the client is built when an activity runs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from pydantic import BaseModel, ConfigDict, Field
from urllib3 import BaseHTTPResponse

from wingsmith.kube.errors import KubeError, classify
from wingsmith.kube.plugins import check_credential_plugins, exec_allow_from_env, withhold_plugin_output


class KubeconfigRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(min_length=1, description="path of a kubeconfig file")
    context: str | None = Field(default=None, description="context in it; None uses current-context")


def new_api_client(ref: KubeconfigRef, *, exec_allow: Collection[str] | None = None) -> k8s.ApiClient:
    """A client for the referenced context. Users whose credentials run a program are refused unless
    allowed (`exec_allow`, default: WINGSMITH_KUBECONFIG_EXEC_ALLOW), before the client sees the file."""
    path = Path(ref.path).expanduser()
    if not path.is_file():
        raise KubeError("KubeconfigMissing", f"kubeconfig file {str(path)!r} does not exist",
                        retryable=False)
    check_credential_plugins(path, ref.context, exec_allow_from_env() if exec_allow is None else exec_allow)
    withhold_plugin_output()
    try:
        return k8s_config.new_client_from_config(
            config_file=str(path), context=ref.context, persist_config=False)
    except ConfigException as exc:
        raise classify(exc, doing=f"loading kubeconfig {str(path)!r} context {ref.context!r}") from None
    except Exception as exc:  # noqa: BLE001
        # Parser messages can quote the file, credentials included: name only the exception type.
        raise KubeError("KubeconfigInvalid", f"kubeconfig {str(path)!r} could not be read "
                        f"({type(exc).__name__})", retryable=False) from None


# Clients are expensive to build (the kubeconfig parsed, a TLS context, a new connection pool and so
# new TLS handshakes) and activities make many short calls: one client per kubeconfig file and
# context serves every activity of the process. It is rebuilt when the file changes and after
# SHARED_CLIENT_SECONDS, so rotated credentials and certificates are picked up.
SHARED_CLIENT_SECONDS = 600.0
_shared: dict[tuple[str, str | None], tuple[tuple[int, int], float, k8s.ApiClient]] = {}
_shared_lock = threading.Lock()


def shared_api_client(ref: KubeconfigRef) -> k8s.ApiClient:
    """A client for `ref` shared by the whole process (thread-safe for the blocking calls activities
    make). Never close it; a replaced one is closed by garbage collection once no call uses it."""
    path = Path(ref.path).expanduser()
    try:
        stat = path.stat()
    except OSError:
        return new_api_client(ref)  # raises the same clear error as a fresh client would
    key, version, now = (str(path), ref.context), (stat.st_mtime_ns, stat.st_size), time.monotonic()
    with _shared_lock:
        hit = _shared.get(key)
        if hit is not None and hit[0] == version and now - hit[1] < SHARED_CLIENT_SECONDS:
            return hit[2]
    client = new_api_client(ref)
    with _shared_lock:
        _shared[key] = (version, now, client)
    return client


# What the adapters call and read back. The kubernetes client imports each on first use; the core API
# module alone is about a second of CPU, which the first inventory read or rollout would wait for.
_PRELOAD = ("CoreV1Api", "CustomObjectsApi", "V1NodeList", "V1Node", "V1NodeSpec", "V1NodeStatus",
            "V1NodeCondition", "V1PodList", "V1Pod", "V1PodSpec", "V1PodStatus", "V1PodCondition", "V1Container",
            "V1ContainerStatus", "V1ResourceRequirements", "V1ObjectMeta", "V1Service", "V1Namespace")


def preload() -> None:
    """Import the parts of the kubernetes client the adapters use, at process start (a worker's
    startup, not its first activity)."""
    for name in _PRELOAD:
        getattr(k8s, name)


def raw_json(resp: object) -> Any:
    """The JSON body of a call made with `_preload_content=False`. The generated client then
    returns urllib3's response, though its signatures still name the decoded model."""
    return json.loads(cast(BaseHTTPResponse, resp).data)

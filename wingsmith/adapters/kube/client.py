"""Kubernetes API clients built from a kubeconfig *reference*, at call time.

Workflows and activity inputs carry only where the kubeconfig lives (a reference: `file:`, `env:` or
`secret:`, see wingsmith/adapters/kube/kubeconfig.py) and a context name, never its contents or credentials;
the client is built when an activity runs, from content the plane's own loader read and checked.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException
from urllib3 import BaseHTTPResponse

from wingsmith.adapters.kube.errors import KubeError, classify
from wingsmith.adapters.kube.kubeconfig import KubeconfigPolicy, SecretReader, fingerprint, load_kubeconfig
from wingsmith.adapters.kube.plugins import withhold_plugin_output
from wingsmith.domain.kube_ref import KubeconfigRef  # the plain model, shared with workflows and the API


def new_api_client(ref: KubeconfigRef, *, policy: KubeconfigPolicy | None = None,
                   secrets: SecretReader | None = None) -> k8s.ApiClient:
    """A client for the referenced context, configured from a dict the plane's loader checked (default
    policy: this process's settings), so the client never opens a kubeconfig path of its own."""
    policy = policy or KubeconfigPolicy.from_settings()
    config, context = load_kubeconfig(ref.source, ref.context, policy, secrets)
    withhold_plugin_output()
    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config_from_dict(config, context=context, client_configuration=configuration,
                                              persist_config=False)
    except ConfigException as exc:
        raise classify(exc, doing=f"loading kubeconfig {ref.source!r} context {context!r}") from None
    except Exception as exc:  # noqa: BLE001
        # Loader messages can quote the content, credentials included: name only the exception type.
        raise KubeError("KubeconfigInvalid", f"kubeconfig {ref.source!r} context {context!r} could not be "
                        f"loaded ({type(exc).__name__})", retryable=False) from None
    return k8s.ApiClient(configuration=configuration)


# Clients are expensive to build (the kubeconfig parsed, a TLS context, a new connection pool and so
# new TLS handshakes) and activities make many short calls: one client per kubeconfig reference and
# context serves every activity of the process. It is rebuilt when the content may have changed (a
# file's stat, a variable's hash) and after SHARED_CLIENT_SECONDS (a Secret is only seen again then),
# so rotated credentials and certificates are picked up.
SHARED_CLIENT_SECONDS = 600.0
_shared: dict[tuple[str, str | None], tuple[object, float, k8s.ApiClient]] = {}
_shared_lock = threading.Lock()


def shared_api_client(ref: KubeconfigRef) -> k8s.ApiClient:
    """A client for `ref` shared by the whole process (thread-safe for the blocking calls activities
    make). Never close it; a replaced one is closed by garbage collection once no call uses it."""
    key, version, now = (ref.source, ref.context), fingerprint(ref.source), time.monotonic()
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

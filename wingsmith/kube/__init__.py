"""Kubernetes adapter: clients from kubeconfig references, DynamoGraphDeployment I/O, error mapping.

The names below load on first use, so a process that only checks or stores kubeconfig references
(the API: wingsmith.kube.kubeconfig) never loads the `kubernetes` client (tests/test_layers.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wingsmith.kube.client import new_api_client, preload, shared_api_client
    from wingsmith.kube.dgd import AppliedObject, DgdClient
    from wingsmith.kube.errors import classify, with_retries
    from wingsmith.kube.kube_error import KubeError
    from wingsmith.kube_ref import KubeconfigRef

_HOME = {"new_api_client": "wingsmith.kube.client", "preload": "wingsmith.kube.client",
         "shared_api_client": "wingsmith.kube.client", "AppliedObject": "wingsmith.kube.dgd",
         "DgdClient": "wingsmith.kube.dgd", "KubeError": "wingsmith.kube.kube_error",
         "classify": "wingsmith.kube.errors", "with_retries": "wingsmith.kube.errors",
         "KubeconfigRef": "wingsmith.kube_ref"}

__all__ = ["AppliedObject", "DgdClient", "KubeError", "KubeconfigRef", "classify",
           "new_api_client", "preload", "shared_api_client", "with_retries"]


def __getattr__(name: str) -> object:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Kubernetes adapter: clients from kubeconfig references, DynamoGraphDeployment I/O, error mapping.

The names below load on first use, so a process that only checks or stores kubeconfig references
(the API: wingsmith.adapters.kube.kubeconfig) never loads the `kubernetes` client (tests/test_layers.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wingsmith.adapters.kube.client import new_api_client, preload, shared_api_client
    from wingsmith.adapters.kube.dgd import AppliedObject, DgdClient
    from wingsmith.adapters.kube.errors import classify, with_retries
    from wingsmith.adapters.kube.kube_error import KubeError
    from wingsmith.domain.kube_ref import KubeconfigRef

_HOME = {"new_api_client": "wingsmith.adapters.kube.client", "preload": "wingsmith.adapters.kube.client",
         "shared_api_client": "wingsmith.adapters.kube.client", "AppliedObject": "wingsmith.adapters.kube.dgd",
         "DgdClient": "wingsmith.adapters.kube.dgd", "KubeError": "wingsmith.adapters.kube.kube_error",
         "classify": "wingsmith.adapters.kube.errors", "with_retries": "wingsmith.adapters.kube.errors",
         "KubeconfigRef": "wingsmith.domain.kube_ref"}

__all__ = ["AppliedObject", "DgdClient", "KubeError", "KubeconfigRef", "classify",
           "new_api_client", "preload", "shared_api_client", "with_retries"]


def __getattr__(name: str) -> object:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

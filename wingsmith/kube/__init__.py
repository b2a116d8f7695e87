"""Kubernetes adapter: clients from kubeconfig references, DynamoGraphDeployment I/O, error mapping."""

from wingsmith.kube.client import KubeconfigRef, new_api_client, preload, shared_api_client
from wingsmith.kube.dgd import AppliedObject, DgdClient
from wingsmith.kube.errors import KubeError, classify, with_retries

__all__ = ["AppliedObject", "DgdClient", "KubeError", "KubeconfigRef", "classify",
           "new_api_client", "preload", "shared_api_client", "with_retries"]

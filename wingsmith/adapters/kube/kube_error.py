"""The error every Kubernetes failure becomes (wingsmith.adapters.kube.errors maps the client's exceptions to
it). Apart, so that checking a kubeconfig reference (the API does) needs no `kubernetes` client."""

from __future__ import annotations

from wingsmith.domain.errors import TypedError


class KubeError(TypedError):
    """A kubernetes client failure, typed and marked retryable or not."""

"""Which kubeconfig reaches a cluster, by reference (the kubeconfig itself never enters a workflow,
a log line or an error): a plain model, so workflows and the API can carry it without the
`kubernetes` client that wingsmith.adapters.kube loads."""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, ConfigDict, Field


class KubeconfigRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # `path` is how histories recorded before references spelled it.
    source: str = Field(min_length=1, validation_alias=AliasChoices("source", "path"),
                        description="where the kubeconfig is: file:<path>, env:KUBECONFIG_<NAME> or "
                                    "secret:<namespace>/<name>[#<key>]")
    context: str | None = Field(default=None, description="context in it; None uses current-context")

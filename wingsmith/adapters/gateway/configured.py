"""The gateway client the settings name, built at call time: its admin token or kubeconfig is a
reference read then, never passed through a workflow. Used by the endpoint activities and the API."""

from __future__ import annotations

from wingsmith.adapters.gateway.client import GatewayClient, GatewayError
from wingsmith.adapters.gateway.local import LocalGatewayClient
from wingsmith.adapters.kube.kubeconfig import KubeconfigPolicy
from wingsmith.domain.config import Settings
from wingsmith.domain.kube_ref import KubeconfigRef


def gateway_client(settings: Settings) -> GatewayClient:
    if settings.gateway == "envoy":
        if not settings.gateway_kubeconfig:
            raise GatewayError("GatewayNotConfigured", "WINGSMITH_GATEWAY_KUBECONFIG is not set for the envoy gateway",
                               retryable=False)
        # Loaded only for the envoy gateway: a plane on the local gateway (and its API) needs no `kubernetes`.
        from wingsmith.adapters.gateway.envoy import EnvoyGatewayClient
        from wingsmith.adapters.kube.client import new_api_client

        # The gateway's kubeconfig is a reference like a member cluster's, through the same loader and policy.
        policy = KubeconfigPolicy.from_settings(settings)
        return EnvoyGatewayClient(KubeconfigRef(source=settings.gateway_kubeconfig, context=settings.gateway_context),
                                  namespace=settings.gateway_namespace, gateway_name=settings.gateway_name,
                                  api_client_factory=lambda ref: new_api_client(ref, policy=policy))
    if not settings.gateway_admin_token_ref:
        raise GatewayError("GatewayNotConfigured", "WINGSMITH_GATEWAY_ADMIN_TOKEN_REF is not set for the local gateway",
                           retryable=False)
    return LocalGatewayClient(settings.gateway_url, settings.gateway_admin_token_ref)

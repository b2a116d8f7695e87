"""The published CRD schemas of the Envoy AI Gateway, Envoy Gateway and Gateway API kinds the plane
renders for `WINGSMITH_GATEWAY=envoy`, kept to check the rendering against (tests/gateway/test_envoy_schemas.py).
Not served by the Kubernetes emulator (it serves the minimal hand-written ones in sim/kube/crds)."""

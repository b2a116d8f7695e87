"""Issue 48 item 5: a Dynamo entry's card is read from every place upstream names it (the product node label, GKE's
accelerator label, a DRA resource claim's product selector, a card or cloud instance type in the folder or file
name), its generation where only that is named (`deploy_hopper_16gpu.yaml`, `nvidia.com/gpu.family`), and a
manifest that serves the model with plain Deployments is reported, not skipped. Fixtures are DGD manifests in
upstream's own format (v1alpha1 `services`, v1beta1 `components`)."""

from __future__ import annotations

from wingsmith.domain.recipes.dynamo_import import import_dynamo

_V1BETA1 = """
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata: {{name: fixture}}
spec:
  backendFramework: vllm
  components:
  - name: Frontend
    type: frontend
  - name: VllmWorker
    type: worker
    replicas: 1
    podTemplate:
      spec:
        {pod}
        containers:
        - name: main
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0
          command: [python3, -m, dynamo.vllm]
          args: [--model, fixture-lab/Card-8B, --tensor-parallel-size, "1"]
          resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"""
_CLAIM_TEMPLATE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-b200}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"'}
---
"""
_PLAIN = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: card-8b-vllm-serve}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:latest
        args: [vllm, serve, fixture-lab/Card-8B]
"""


def _entries(files: dict[str, str]):
    entries, problems, _ = import_dynamo(files)
    return {e.source_path: e for e in entries}, problems


def test_cards_are_read_from_labels_claims_and_names():
    files = {
        "recipes/card-8b/vllm/agg/deploy.yaml": _V1BETA1.format(
            pod="nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}"),
        "recipes/card-8b/vllm/agg-gke/deploy.yaml": _V1BETA1.format(
            pod="nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}"),
        "recipes/card-8b/vllm/agg-dra/deploy.yaml": _CLAIM_TEMPLATE + _V1BETA1.format(
            pod="resourceClaims: [{name: gpu, resourceClaimTemplateName: one-b200}]"),
        "recipes/card-8b/vllm/agg/deploy_hopper_16gpu.yaml": _V1BETA1.format(pod="nodeSelector: {}"),
        "recipes/card-8b/vllm/agg-family/deploy.yaml": _V1BETA1.format(
            pod="nodeSelector: {nvidia.com/gpu.family: blackwell}"),
        "recipes/card-8b/vllm/cloud/deploy-aws-p5.48xlarge.yaml": _V1BETA1.format(pod="nodeSelector: {}"),
    }
    entries, problems = _entries(files)
    got = {path: (e.card, e.card_source, e.card_family, e.family_cards) for path, e in entries.items()}
    assert got == {
        "recipes/card-8b/vllm/agg/deploy.yaml": ("h200", "node selector", None, []),
        "recipes/card-8b/vllm/agg-gke/deploy.yaml": ("h100", "node selector", None, []),
        "recipes/card-8b/vllm/agg-dra/deploy.yaml": ("b200", "resource claim", None, []),
        "recipes/card-8b/vllm/agg/deploy_hopper_16gpu.yaml": (None, "directory name", "hopper", ["h100", "h200"]),
        "recipes/card-8b/vllm/agg-family/deploy.yaml": (None, "node selector", "blackwell",
                                                        ["b200", "b300", "gb200", "gb300"]),
        "recipes/card-8b/vllm/cloud/deploy-aws-p5.48xlarge.yaml": ("h100", "directory name", None, []),
    }, problems
    assert entries["recipes/card-8b/vllm/agg-dra/deploy.yaml"].workers[0].card == "b200"


def test_a_manifest_of_plain_deployments_is_reported_with_its_reason():
    files = {"recipes/card-8b/deploy/vllm-serve.yaml": _PLAIN,
             "recipes/card-8b/vllm/agg/deploy.yaml": _V1BETA1.format(pod="nodeSelector: {}")}
    entries, problems = _entries(files)
    assert list(entries) == ["recipes/card-8b/vllm/agg/deploy.yaml"]
    reported = [p for p in problems if p.file == "recipes/card-8b/deploy/vllm-serve.yaml"]
    assert [(p.field, p.scope) for p in reported] == [("kind", "file")]
    assert "deploys plain Deployment/card-8b-vllm-serve" in reported[0].reason

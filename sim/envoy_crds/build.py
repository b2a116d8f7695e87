"""Build `sim/envoy_crds/*.json` from checkouts of the upstream repositories, at the commits given.

    python -m sim.envoy_crds.build --ai-gateway DIR@REV --envoy-gateway DIR@REV --gateway-api DIR@REV

Each file is read with `git show REV:path` (the checkout's working tree is not needed) and kept as the
Dynamo CRDs are (sim/kube/build_crds.py): names, scope, versions and each version's schema without
upstream's descriptions, with its source (repository, commit, path) in an annotation; SOURCE.md lists
them. The revisions used: Envoy AI Gateway's main, and the Envoy Gateway and Gateway API releases its
go.mod requires at that commit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from sim.kube.build_crds import compact_crd

OUT = Path(__file__).parent
# (option, repository URL, paths of the CRD files in it)
SOURCES = (
    ("ai_gateway", "https://github.com/envoyproxy/ai-gateway", (
        "manifests/charts/ai-gateway-crds-helm/templates/aigateway.envoyproxy.io_aigatewayroutes.yaml",
        "manifests/charts/ai-gateway-crds-helm/templates/aigateway.envoyproxy.io_aiservicebackends.yaml")),
    ("envoy_gateway", "https://github.com/envoyproxy/gateway", (
        "charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backends.yaml",)),
    ("gateway_api", "https://github.com/kubernetes-sigs/gateway-api", (
        "config/crd/standard/gateway.networking.k8s.io_gateways.yaml",
        "config/crd/standard/gateway.networking.k8s.io_httproutes.yaml")),
)


def _read(checkout: str, rev: str, path: str) -> tuple[str, str]:
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", f"{rev}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    text = subprocess.run(["git", "-C", checkout, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    return commit, text


def build(revisions: dict[str, str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for option, repo, paths in SOURCES:
        checkout, _, rev = revisions[option].rpartition("@")
        for path in paths:
            commit, text = _read(checkout, rev, path)
            docs = [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "CustomResourceDefinition"]
            for doc in docs:
                out[f"{doc['metadata']['name']}.json"] = compact_crd(doc, f"{repo}/blob/{commit}/{path}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option, _, _ in SOURCES:
        parser.add_argument(f"--{option.replace('_', '-')}", required=True, metavar="DIR@REV")
    args = parser.parse_args(argv)
    built = build({option: getattr(args, option) for option, _, _ in SOURCES})
    lines = ["# Envoy AI Gateway, Envoy Gateway and Gateway API CRDs (schemas only)", "",
             "Written by `python -m sim.envoy_crds.build`; upstream's descriptions are dropped. Apache-2.0.",
             "Do not edit by hand; rebuild. Each file's `wingsmith.dev/source` annotation names its origin:", ""]
    for name, crd in sorted(built.items()):
        (OUT / name).write_text(json.dumps(crd, indent=1, sort_keys=True) + "\n")
        lines.append(f"- `{name}`: {crd['metadata']['annotations']['wingsmith.dev/source']}")
    (OUT / "SOURCE.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

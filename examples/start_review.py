"""Start a model's review (the `ArtifactWorkflow`) from your own code, straight on Temporal, the way
the API does: same workflow type, id, input model, task queue and search attributes, so the plane's
worker runs it and the API, CLI, console and Temporal UI all see it.

    .venv/bin/python examples/start_review.py hf:moonshotai/Kimi-K3 --requested-by ana
    .venv/bin/python examples/start_review.py hf:Qwen/Qwen3-8B --sha <40 hex> --address 127.0.0.1:7233

Without `--sha` the revision is resolved to its commit on the Hub the plane uses (the commit names the
workflow). Without `--address` the Temporal address comes from TEMPORAL_ADDRESS, else the plane
`wingsmith up` recorded in $WINGSMITH_HOME/plane.json, else 127.0.0.1:<WINGSMITH_TEMPORAL_PORT>.
Starting twice starts nothing new: the second start returns the same artifact (`"started": false`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from wingsmith.adapters.hub.resolver import Resolver
from wingsmith.adapters.starter import register_artifact
from wingsmith.adapters.temporal import connect, workflow_ui_url
from wingsmith.cli.plane import hub_endpoint, recorded
from wingsmith.domain.config import get_settings
from wingsmith.domain.hub.source import parse_source


async def start(source: str, *, requested_by: str, sha: str | None, address: str | None,
                namespace: str | None, task_queue: str | None) -> dict:
    settings = get_settings()
    if namespace:
        settings = settings.model_copy(update={"temporal_namespace": namespace})
    if sha is None:
        resolver = Resolver(hub_endpoint(settings), settings.hf_token_ref, settings.home_dir / "hf-cache")
        sha = resolver.resolve(source).sha
    plane = recorded(settings)
    client = await connect(settings, address=address or settings.temporal_address or plane.get("temporal_address"))
    started = await register_artifact(client, settings, source=parse_source(source), sha=sha,
                                      requested_by=requested_by, task_queue=task_queue)
    ui = settings.temporal_ui_url if "temporal_ui_url" in settings.model_fields_set else plane.get("temporal_ui_url")
    link = workflow_ui_url(settings.model_copy(update={"temporal_ui_url": ui or settings.temporal_ui_url}),
                           started.workflow_id)
    return {**started.model_dump(), "workflow_url": link}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="hf:<org>/<name>[@revision]")
    parser.add_argument("--requested-by", default="example", help="who asks for the review (recorded)")
    parser.add_argument("--sha", help="the commit the revision points at (default: resolve it on the Hub)")
    parser.add_argument("--address", help="Temporal frontend host:port")
    parser.add_argument("--namespace", help="Temporal namespace (default: $TEMPORAL_NAMESPACE or default)")
    parser.add_argument("--task-queue", help="default: the plane's, $WINGSMITH_TASK_QUEUE or wingsmith")
    args = parser.parse_args(argv)
    result = asyncio.run(start(args.source, requested_by=args.requested_by, sha=args.sha, address=args.address,
                               namespace=args.namespace, task_queue=args.task_queue))
    print(json.dumps(result, indent=2), flush=True)
    # A process that used a Temporal client can abort at interpreter exit (an open SDK issue):
    # leaving through os._exit keeps the exit code true.
    os._exit(0)


if __name__ == "__main__":
    main()

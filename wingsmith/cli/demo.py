"""`wingsmith demo`: the seed journey end to end on a running local plane (`wingsmith up
--offline-hub`): resolve Kimi-K3 → register → approve → a workload on two simulated clusters →
an endpoint → one chat completion through the gateway. Prints each step and what it created."""

from __future__ import annotations

import sys
import time
from typing import Any

from wingsmith.cli.api_client import API_HELP, request

MODEL = "hf:moonshotai/Kimi-K3"


def register(sub) -> None:
    p = sub.add_parser("demo", help="run the Kimi-K3 journey end to end on the local plane")
    p.add_argument("--api", default=None, help=API_HELP)
    p.add_argument("--gateway", default=None,
                   help="gateway base URL (default: $WINGSMITH_GATEWAY_URL, else the plane's in plane.json)")
    p.add_argument("--name", default="kimi-k3", help="the endpoint's model name (and the workload's id)")
    p.set_defaults(func=_run)


def _step(n: int, text: str) -> None:
    print(f"\n[{n}/6] {text}", flush=True)


def _fail(text: str) -> int:
    print(f"wingsmith demo: {text}", file=sys.stderr)
    return 1


def _run(args) -> int:
    import httpx

    from wingsmith.cli.plane import gateway_url
    from wingsmith.cli.workloads import wait_for_stage

    prog = "wingsmith demo"
    _step(1, f"resolve {MODEL} (writes nothing)")
    code, p = request(args, "GET", "/v1/artifacts/resolve", params={"source": MODEL}, prog=prog)
    if code:
        return code
    print(f"  commit {p['sha']}, {p['weight_bytes']:,} weight bytes ({p['weight_bytes_source']}), {p['architecture']}")
    for v in (p.get("evidence") or {}).get("variants", []):
        print(f"  variant {v['name']}: {v['precision']}, published floor {v['vram_minimum_gb']} GB")

    _step(2, "register it: the artifact workflow builds the draft")
    code, reg = request(args, "POST", "/v1/artifacts", {"source": MODEL}, prog=prog)
    if code:
        return code
    print(f"  artifact {reg['id']}\n  workflow {reg['workflow_url']}")
    artifact: dict[str, Any] = {}
    for _ in range(120):
        code, artifact = request(args, "GET", f"/v1/artifacts/{reg['id']}", prog=prog)
        if code == 0 and artifact.get("state") != "resolving" and (
                artifact.get("draft") or artifact["state"] != "draft"):
            break
        time.sleep(0.5)
    print(f"  state {artifact['state']}")

    _step(3, "approve the draft (as a different principal, an approver: four-eyes review)")
    if artifact["state"] == "draft":
        code, status = request(args, "POST", f"/v1/artifacts/{reg['id']}/review", {
            "decision": "approve", "comment": "demo: floors and layouts checked",
            "draft_version": artifact["draft"]["version"]}, prog=prog, role="approver")
        if code:
            return code
        print(f"  {status['stage']} by {status['decision']['reviewer']}")
    elif artifact["state"] != "approved":
        return _fail(f"the artifact is {artifact['state']}; register again or pick another model")
    else:
        print("  already approved")

    _step(4, "a workload: 2 replicas of 16 H200 GPUs (multi_node_tp_dp) on two clusters")
    code, created = request(args, "POST", "/v1/workloads", {
        "artifact_id": reg["id"], "hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 2,
        "name": args.name, "served_model_name": args.name}, prog=prog)
    if code:
        return code
    print(f"  workload {created['id']}, --max-num-seqs {created['plan']['max_num_seqs'] or 'engine default'} "
          f"({created['plan']['max_num_seqs_source']})\n  workflow {created['workflow_url']}")
    live = wait_for_stage(args, created["id"], {"serving", "failed"}, prog=prog, timeout=600)
    if not live or live["stage"] != "serving":
        return _fail("the workload did not reach serving")

    _step(5, f"an endpoint: one model name, {args.name!r}, routed to every cluster serving it")
    code, ep = request(args, "POST", "/v1/endpoints", {"name": args.name, "workloads": [created["id"]]}, prog=prog)
    if code == 5 and ep and (ep.get("error") or {}).get("code") == "endpoint_exists":
        print(f"  the endpoint exists with other workloads: moving it to {created['id']}")
        code, ep = request(args, "PATCH", f"/v1/endpoints/{args.name}", {"workloads": [created["id"]]}, prog=prog)
    if code:
        return code
    gateway = gateway_url(args.gateway)
    # Listed is not enough: the name must be routed to this workload (an older endpoint may route another).
    for _ in range(60):
        code, row = request(args, "GET", f"/v1/endpoints/{args.name}", prog=prog, quiet=True)
        if code == 0 and any(b["workload_id"] == created["id"] and b["weight"] > 0 for b in row.get("routes", [])):
            break
        time.sleep(0.5)
    else:
        return _fail(f"the endpoint {args.name} never routed to workload {created['id']}")
    for _ in range(60):
        models = httpx.get(f"{gateway}/v1/models", timeout=5).json().get("data", [])
        if args.name in [m["id"] for m in models]:
            break
        time.sleep(0.5)
    else:
        return _fail(f"the gateway at {gateway} never listed {args.name}")
    print(f"  {gateway}/v1 serves model {args.name!r} from workload {created['id']}")

    _step(6, "one chat completion through the gateway")
    r = httpx.post(f"{gateway}/v1/chat/completions", timeout=30, json={
        "model": args.name, "messages": [{"role": "user", "content": "Say hello from Wingsmith."}]})
    if r.status_code != 200:
        return _fail(f"the gateway answered {r.status_code}: {r.text[:200]}")
    reply = r.json()["choices"][0]["message"]["content"]
    backend = r.headers.get("x-wingsmith-backend", "")
    if backend.split("/", 1)[-1] != created["id"]:
        return _fail(f"answered by {backend or 'an unknown backend'}, not by workload {created['id']}")
    print(f"  answered by {r.headers.get('x-wingsmith-backend', '?')}: {reply}")
    print("\ndone. Follow it all in the Temporal UI; `wingsmith workloads delete "
          f"{created['id']} --wait` tears it down (the endpoint drains it first).")
    return 0

"""`wingsmith demo`: the seed journey end to end on a running local plane (`wingsmith up
--offline-hub`): resolve Kimi-K3 → register → approve → a workload on two simulated clusters →
an endpoint → one chat completion through the gateway. Prints each step and what it created.

It runs beside what a person made on the same plane (the README's journey, say) and leaves that alone
(issue 52): its workload and endpoint have names of its own (`demo-kimi-k3`), and before it moves an endpoint
it did not create, or adds its replicas beside workloads it did not create, it asks (on a terminal; elsewhere
it stops and says so, unless `--yes`)."""

from __future__ import annotations

import sys
import time
from typing import Any

from wingsmith.adapters.http_tls import default_tls
from wingsmith.cli.api_client import API_HELP, request

MODEL = "hf:moonshotai/Kimi-K3"
# Names no step of the README's journey uses: the demo never takes over a person's workload or endpoint.
NAME = "demo-kimi-k3"
PROG = "wingsmith demo"
# The demo's workload: 2 replicas of 16 H200 GPUs, one per simulated H200 cluster.
SHAPE = {"hardware": "h200", "layout": "multi_node_tp_dp", "replicas": 2}
GPUS = 2 * 16
# States of a workload that holds no GPUs (or soon none).
_HOLDS_NOTHING = ("deleting", "deleted", "failed")


def register(sub) -> None:
    p = sub.add_parser("demo", help="run the Kimi-K3 journey end to end on the local plane")
    p.add_argument("--api", default=None, help=API_HELP)
    p.add_argument("--gateway", default=None,
                   help="gateway base URL (default: $WINGSMITH_GATEWAY_URL, else the plane's in plane.json)")
    p.add_argument("--name", default=NAME,
                   help=f"the demo's endpoint model name and workload id (default {NAME}, a name of its own)")
    p.add_argument("--yes", action="store_true",
                   help="do not ask: move an endpoint the demo did not create, and add its GPUs beside workloads "
                        "it did not create")
    p.set_defaults(func=_run)


def _step(n: int, text: str) -> None:
    print(f"\n[{n}/6] {text}", flush=True)


def _fail(text: str) -> int:
    print(f"{PROG}: {text}", file=sys.stderr)
    return 1


def _agreed(args, question: str) -> bool:
    """Whether to go on with something that touches what the demo did not create: `--yes`, else the person's
    answer on a terminal; without a terminal nobody can answer, so no."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        print(f"{PROG}: {question}\n  not without asking: run it again with --yes, or with another --name",
              file=sys.stderr)
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def _run(args) -> int:
    code, artifact_id = _register(args)
    if code:
        return code
    code, workload = _workload(args, artifact_id)
    if code:
        return code
    code = _endpoint(args, workload)
    if code:
        return code
    code = _chat(args, workload)
    if code == 0:
        print(f"\ndone. Follow it all in the Temporal UI. To remove what the demo made: `wingsmith endpoints delete "
              f"{args.name}`, then `wingsmith workloads delete {workload} --wait`.")
    return code


def _register(args) -> tuple[int, str]:
    """Steps 1 to 3: the proposal, the registration and the approval; the approved artifact's id."""
    _step(1, f"resolve {MODEL} (writes nothing)")
    code, p = request(args, "GET", "/v1/artifacts/resolve", params={"source": MODEL}, prog=PROG)
    if code:
        return code, ""
    print(f"  commit {p['sha']}, {p['weight_bytes']:,} weight bytes ({p['weight_bytes_source']}), {p['architecture']}")
    for v in (p.get("evidence") or {}).get("variants", []):
        print(f"  variant {v['name']}: {v['precision']}, published floor {v['vram_minimum_gb']} GB")

    _step(2, "register it: the artifact workflow builds the draft")
    code, reg = request(args, "POST", "/v1/artifacts", {"source": MODEL}, prog=PROG)
    if code:
        return code, ""
    print(f"  artifact {reg['id']}\n  workflow {reg['workflow_url']}")
    artifact: dict[str, Any] = {}
    for _ in range(120):
        code, artifact = request(args, "GET", f"/v1/artifacts/{reg['id']}", prog=PROG)
        if code == 0 and artifact.get("state") != "resolving" and (
                artifact.get("draft") or artifact["state"] != "draft"):
            break
        time.sleep(0.5)
    print(f"  state {artifact['state']}")

    _step(3, "approve the draft (as a different principal, an approver: four-eyes review)")
    if artifact["state"] == "approved":
        print("  already approved")
        return 0, reg["id"]
    if artifact["state"] != "draft":
        return _fail(f"the artifact is {artifact['state']}; register again or pick another model"), ""
    code, status = request(args, "POST", f"/v1/artifacts/{reg['id']}/review", {
        "decision": "approve", "comment": "demo: floors and layouts checked",
        "draft_version": artifact["draft"]["version"]}, prog=PROG, role="approver")
    if code:
        return code, ""
    print(f"  {status['stage']} by {status['decision']['reviewer']}")
    return 0, reg["id"]


def _workload(args, artifact_id: str) -> tuple[int, str]:
    """Step 4: the demo's workload, serving; asks first when the fleet already runs workloads not its own."""
    from wingsmith.cli.workloads import wait_for_stage

    _step(4, f"a workload: {SHAPE['replicas']} replicas of 16 H200 GPUs ({SHAPE['layout']}) on two clusters")
    code, listed = request(args, "GET", "/v1/workloads", prog=PROG)
    if code:
        return code, ""
    others = [w["id"] for w in listed["workloads"] if w["id"] != args.name and w["state"] not in _HOLDS_NOTHING]
    if others and not _agreed(args, f"the fleet already runs workload(s) {', '.join(others)}, which the demo did "
                                    f"not create; the demo adds {GPUS} H200 GPUs beside them. Go on?"):
        return 1, ""
    code, created = request(args, "POST", "/v1/workloads", {
        "artifact_id": artifact_id, **SHAPE, "name": args.name, "served_model_name": args.name}, prog=PROG)
    if code:
        return code, ""
    print(f"  workload {created['id']}, --max-num-seqs {created['plan']['max_num_seqs'] or 'engine default'} "
          f"({created['plan']['max_num_seqs_source']})\n  workflow {created['workflow_url']}")
    live = wait_for_stage(args, created["id"], {"serving", "failed"}, prog=PROG, timeout=600)
    if not live or live["stage"] != "serving":
        return _fail("the workload did not reach serving"), ""
    return 0, created["id"]


def _endpoint(args, workload: str) -> int:
    """Step 5: the demo's endpoint routed to its workload; an endpoint of that name routing elsewhere is moved
    only when agreed. Returns once the gateway routes the name to the demo's workload."""
    from wingsmith.cli.plane import gateway_url
    from wingsmith.cli.waiting import wait_until_published

    _step(5, f"an endpoint: one model name, {args.name!r}, routed to every cluster serving it")
    code, ep = request(args, "POST", "/v1/endpoints", {"name": args.name, "workloads": [workload]}, prog=PROG,
                       quiet=True)
    if code == 5 and ep and (ep.get("error") or {}).get("code") == "endpoint_exists":
        theirs = ", ".join(ep["error"]["details"]["workloads"]) or "no workload"
        if not _agreed(args, f"endpoint {args.name} exists and routes to {theirs}; move it to {workload}?"):
            return 1
        code, ep = request(args, "PATCH", f"/v1/endpoints/{args.name}", {"workloads": [workload]}, prog=PROG)
    elif code:
        print(f"{PROG}: {((ep or {}).get('error') or {}).get('message') or 'the endpoint was refused'}",
              file=sys.stderr)
    if code:
        return code
    routed = wait_until_published(args, args.name, prog=PROG, timeout=60)
    # Routed is not enough: to this workload (an endpoint that routed another must have moved).
    if routed is None or not any(b["workload_id"] == workload and b["weight"] > 0 for b in routed["routes"]):
        return _fail(f"the endpoint {args.name} never routed to workload {workload}")
    print(f"  {gateway_url(args.gateway)}/v1 serves model {args.name!r} from workload {workload}")
    return 0


def _chat(args, workload: str) -> int:
    """Step 6: one chat completion through the gateway, answered by the demo's workload."""
    import httpx

    from wingsmith.cli.plane import gateway_url

    _step(6, "one chat completion through the gateway")
    r = httpx.post(f"{gateway_url(args.gateway)}/v1/chat/completions", timeout=30, verify=default_tls(), json={
        "model": args.name, "messages": [{"role": "user", "content": "Say hello from Wingsmith."}]})
    if r.status_code != 200:
        return _fail(f"the gateway answered {r.status_code}: {r.text[:200]}")
    backend = r.headers.get("x-wingsmith-backend", "")
    if backend.split("/", 1)[-1] != workload:
        return _fail(f"answered by {backend or 'an unknown backend'}, not by workload {workload}")
    print(f"  answered by {backend}: {r.json()['choices'][0]['message']['content']}")
    return 0

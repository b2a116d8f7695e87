"""`wingsmith workloads create|list|show|scale|upgrade|pause-upgrade|resume-upgrade|abort-upgrade|delete`
and `wingsmith endpoints create|list|show|set-workloads|delete`,
through a running plane's API, with progress while they wait."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from typing import Any

from wingsmith.cli import autoscaling
from wingsmith.cli.api_client import add_common, call, pairs, request, table


def register(sub) -> None:
    w = sub.add_parser("workloads", help="create, scale and delete workloads")
    verbs = w.add_subparsers(dest="verb", metavar="VERB", required=True)
    c = verbs.add_parser("create", help="create a workload from an approved artifact (operator)")
    c.add_argument("artifact_id", help="<org>/<name>@<sha>")
    c.add_argument("--hardware", required=True, help="h100, h200, b200, b300, gb200, gb300")
    c.add_argument("--layout", default="single_node_tp")
    c.add_argument("--replicas", type=int, default=None,
                   help="copies to run (default 1); or size it by traffic with the flags below instead")
    t = c.add_argument_group(
        "size by traffic (instead of --replicas; all five together)",
        "AIConfigurator plans each candidate card (the one asked for and those the clusters declare) for this "
        "traffic; the cheapest feasible card wins when the clusters carry cost_per_gpu_hour, else the fewest "
        "GPUs. Use --dry-run to see every card's plan and why it lost. A search not cached yet takes minutes.")
    for flag, kind, metavar, text in TARGET_FLAGS:
        t.add_argument(flag, type=kind, metavar=metavar, help=text)
    c.add_argument("--variant", default="default")
    c.add_argument("--feature", action="append", default=[])
    c.add_argument("--name", help="workload id (default: generated)")
    c.add_argument("--served-model-name")
    c.add_argument("--dry-run", action="store_true", help="show plan, placement and manifests; change nothing")
    c.add_argument("--wait", action="store_true", help="wait until it serves (or fails)")
    c.add_argument("--detach", action="store_true",
                   help="sized by traffic: do not wait for the plan; print where to follow it (its status URL)")
    add_common(c)
    c.set_defaults(func=_create)
    ls = verbs.add_parser("list", help="list workloads")
    add_common(ls)
    ls.set_defaults(func=_list)
    for verb, func, text in (("show", _show, "per-cluster state and events"), ("delete", _delete, "delete (operator)")):
        v = verbs.add_parser(verb, help=text)
        v.add_argument("id")
        if verb == "delete":
            v.add_argument("--wait", action="store_true")
        add_common(v)
        v.set_defaults(func=func)
    s = verbs.add_parser("scale", help="change the replica count (operator)")
    s.add_argument("id")
    s.add_argument("replicas", type=int)
    add_common(s)
    s.set_defaults(func=_scale)
    u = verbs.add_parser("upgrade", help="move to another approved artifact, progressively (operator)")
    u.add_argument("id")
    u.add_argument("artifact_id", help="<org>/<name>@<sha> of an approved artifact of the same model")
    u.add_argument("--steps", default="10,50,100", help="percent of traffic on the new version at each step")
    u.add_argument("--dwell", type=float, default=60, help="seconds each step is watched before the next")
    u.add_argument("--reason", help="why (shown in the events)")
    u.add_argument("--wait", action="store_true", help="follow it until it succeeds, rolls back or is aborted")
    add_common(u)
    u.set_defaults(func=_upgrade)
    for verb, text in (("pause", "stop after the current step"), ("resume", "go on"),
                       ("abort", "roll back: weights back, the new version removed")):
        c = verbs.add_parser(f"{verb}-upgrade", help=f"{text} (operator)")
        c.add_argument("id")
        c.add_argument("--reason")
        add_common(c)
        c.set_defaults(func=_control, control=verb)
    autoscaling.register(verbs)

    e = sub.add_parser("endpoints", help="one model name routed to workloads on every cluster")
    everbs = e.add_subparsers(dest="verb", metavar="VERB", required=True)
    ec = everbs.add_parser("create", help="create an endpoint (operator)")
    ec.add_argument("name", help="the model name clients send")
    ec.add_argument("workloads", nargs="+")
    ec.add_argument("--wait", action="store_true",
                    help="return once the gateway routes the name (a chat sent then is answered)")
    add_common(ec)
    ec.set_defaults(func=_endpoint_create)
    es = everbs.add_parser("set-workloads", help="change an endpoint's workloads; leaving ones are drained (operator)")
    es.add_argument("name", help="the endpoint's model name")
    es.add_argument("workloads", nargs="+", help="the endpoint's workloads from now on")
    add_common(es)
    es.set_defaults(func=_endpoint_set_workloads)
    el = everbs.add_parser("list", help="list endpoints")
    add_common(el)
    el.set_defaults(func=_endpoint_list)
    for verb, func, text in (("show", _endpoint_show, "state, conditions, and each backend's weight and health"),
                             ("delete", _endpoint_delete, "delete: drains, then removes its routes (operator)")):
        v = everbs.add_parser(verb, help=text)
        v.add_argument("name")
        add_common(v)
        v.set_defaults(func=func)


# The traffic target's flags: (flag, type, metavar, help), in the order of the API's `target` fields.
TARGET_FLAGS = (("--target-rps", float, "RPS", "requests per second to serve (target.requests_per_second)"),
                ("--isl", int, "TOKENS", "input (prompt) tokens per request (target.isl)"),
                ("--osl", int, "TOKENS", "output tokens per request (target.osl)"),
                ("--ttft-ms", float, "MS", "time to first token to stay within (target.ttft_ms)"),
                ("--tpot-ms", float, "MS", "time per output token to stay within (target.tpot_ms)"))
TARGET_FIELDS = ("requests_per_second", "isl", "osl", "ttft_ms", "tpot_ms")
# A create sized by traffic is sent again once its plan is there (the plan is kept, so it is answered at
# once); a plan kept for less than the follow took is planned again, and followed again, this many times.
CREATE_TRIES = 3


def target_of(args) -> dict | None:
    """The API's `target` from the flags, None when sizing by replicas; ValueError says what is wrong."""
    given = {flag: getattr(args, flag.removeprefix("--").replace("-", "_")) for flag, *_ in TARGET_FLAGS}
    named = [flag for flag, value in given.items() if value is not None]
    if not named:
        return None
    if args.replicas is not None:
        raise ValueError(f"give either --replicas or a traffic target ({', '.join(named)}), not both: the target "
                         "decides the replicas")
    missing = [flag for flag, value in given.items() if value is None]
    if missing:
        raise ValueError(f"a traffic target takes all of {', '.join(given)}; missing: {', '.join(missing)}")
    return dict(zip(TARGET_FIELDS, given.values(), strict=True))


def _figure(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def target_text(target: dict) -> str:
    return (f"{target['requests_per_second']:g} req/s, ISL {target['isl']}, OSL {target['osl']}, "
            f"TTFT ≤ {target['ttft_ms']:g} ms, TPOT ≤ {target['tpot_ms']:g} ms")


def candidates_table(candidates: list[dict]) -> str:
    """One line per candidate card: its configuration and what AIConfigurator predicts for it, its cost
    when the fleet prices the card, and why it lost (the chosen one says "chosen")."""
    rows = []
    for c in candidates:
        plan, conf = c["plan"], c["plan"].get("configuration") or {}
        rows.append((plan["card"], f"{conf['mode']} {conf['parallelism']}" if conf else None,
                     plan["replicas"] or None, plan["gpus"] or None, _figure(conf.get("ttft_ms")),
                     _figure(conf.get("tpot_ms"), "{:.1f}"), _figure(conf.get("tokens_per_second_per_gpu")),
                     _figure(conf.get("tokens_per_second_per_user"), "{:.1f}"),
                     # A plan of no GPUs (the target missed) costs nothing only on paper.
                     _figure(c.get("cost_per_hour") if plan["gpus"] else None, "{:.2f}"),
                     c.get("why_not") or "chosen"))
    return table(("CARD", "CONFIGURATION", "REPLICAS", "GPUS", "TTFT MS", "TPOT MS", "TOK/S/GPU", "TOK/S/USER",
                  "COST/HOUR", "WHY NOT"), rows)


def target_plan_text(choice: dict) -> str:
    """What a dry-run sized by traffic prints after the plan: the chosen card's plan, then every card's."""
    chosen = choice.get("chosen")
    lines = []
    if chosen:
        conf = chosen["configuration"]
        lines.append(f"chosen: {chosen['card']}, {chosen['replicas']} × {conf['parallelism']} ({conf['mode']}), "
                     f"{chosen['gpus']} GPUs; predicted TTFT {conf['ttft_ms']:.0f} ms, TPOT {conf['tpot_ms']:.1f} ms, "
                     f"{conf['tokens_per_second_per_gpu']:.0f} tokens/s/GPU"
                     + (f" ({chosen['source']['tool']} {chosen['source']['version']})" if chosen.get("source")
                        else ""))
    elif choice.get("refusal"):
        lines.append(choice["refusal"])
    return "\n".join([*lines, "", candidates_table(choice.get("candidates") or [])])


def fresh_events(before: list[str], now: list[str]) -> list[str]:
    """The events in `now` that `before` did not hold. The API answers with the last events only, so
    the window slides: what is new starts after the longest tail of `before` that `now` begins with."""
    for overlap in range(min(len(before), len(now)), 0, -1):
        if before[len(before) - overlap:] == now[:overlap]:
            return now[overlap:]
    return now


def wait_for_stage(args, workload_id: str, stages: set[str], *, prog: str, timeout: float = 1800) -> dict | None:
    """Poll the workload, printing each new event, until it reaches one of `stages`."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, data = request(args, "GET", f"/v1/workloads/{workload_id}", prog=prog)
        live = (data or {}).get("live") or {}
        for event in fresh_events(seen, live.get("events", [])):
            print(f"  {event}", flush=True)
        seen = live.get("events") or seen
        if live.get("stage") in stages:
            if live.get("failure"):  # why, for every cluster when nothing could be placed
                print(f"  failed: {live['failure']}", flush=True)
            return live
        time.sleep(1)
    print(f"{prog}: still not {' or '.join(sorted(stages))} after {timeout:.0f}s", file=sys.stderr)
    return None


def _create(args) -> int:
    prog = "wingsmith workloads create"
    try:
        target = target_of(args)
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    body = {"artifact_id": args.artifact_id, "hardware": args.hardware, "layout": args.layout,
            "variant": args.variant, "features": args.feature, "name": args.name,
            "served_model_name": args.served_model_name, "dry_run": args.dry_run}
    if target:
        body["target"] = target
        print(f"{prog}: asking AIConfigurator to plan {target_text(target)} (a search not cached yet takes "
              "minutes)", file=sys.stderr, flush=True)
    else:
        body["replicas"] = 1 if args.replicas is None else args.replicas
    code, data = post_workload(args, body, prog=prog)
    candidates = (((data or {}).get("error") or {}).get("details") or {}).get("candidates")
    if code and candidates and not args.json:  # unreachable: what each card reaches, in the same table
        print(candidates_table(candidates), file=sys.stderr)
    refused = ((data or {}).get("error") or {})
    if code and refused.get("code") == "quota_exceeded" and not args.json:  # every limit's numbers, a line each
        print("\n".join(f"  {words}" for words in refused["details"]["words"]), file=sys.stderr)
    if code:
        return code
    if args.json:
        import json
        print(json.dumps(data, indent=2))
        return 0
    if data.get("state") == "planning":  # --detach
        print(pairs([("planning", ", ".join(data["cards"])), ("workflow", data["workflow_url"]),
                     ("status", data["status_url"]), ("then", data["then"])]))
        return 0
    plan = data["plan"]
    print(pairs([("workload", plan["workload_id"]), ("model", f"{plan['served_model_name']} ({plan['hf_model_id']})"),
                 ("shape",
                  f"{plan['replicas']} × {plan['gpus_per_replica']} {plan['hardware']} GPUs, {plan['layout']}"),
                 ("--max-num-seqs", f"{plan['max_num_seqs'] or 'engine default'} ({plan['max_num_seqs_source']})"),
                 ("workflow", data.get("workflow_url"))]))
    if target and data.get("target_plan"):
        print(f"\nsized by traffic: {target_text(target)}\n" + target_plan_text(data["target_plan"]))
    elif target:  # a create answers with the plan only: the candidates are the dry-run's
        print(f"\nsized by traffic: {target_text(target)} (--dry-run shows every card's plan)")
    if args.dry_run:
        print("\n" + placement_text(data["placement"], data["manifests"]))
        if data.get("quota"):
            from wingsmith.cli.teams import verdict_text
            print("\n" + verdict_text(data["quota"]))
        return 0
    if args.wait:
        live = wait_for_stage(args, plan["workload_id"], {"serving", "failed"}, prog=prog)
        return 0 if live and live["stage"] == "serving" else 1
    return 0


def post_workload(args, body: dict, *, prog: str) -> tuple[int, Any]:
    """POST /v1/workloads. Sized by traffic, the API answers at once while AIConfigurator plans: the plan is
    followed, its progress printed (wingsmith/cli/waiting.py), unless --detach; then a create is sent again,
    and gets the plan the follow saw at once (a dry-run's answer is the status URL's own)."""
    from wingsmith.cli.waiting import follow_plan
    code, data = 0, None
    for _ in range(CREATE_TRIES):
        # Answered at once while AIConfigurator plans (RFC 7240); without it the API waits for the plan.
        code, data = request(args, "POST", "/v1/workloads", body, prog=prog, headers={"Prefer": "respond-async"})
        if code or not (isinstance(data, dict) and data.get("state") == "planning") or args.detach:
            return code, data
        code, data = follow_plan(args, data, prog=prog)
        if code or body["dry_run"]:
            return code, data
    return code, data


def placement_text(placement: dict, manifests: dict) -> str:
    """A dry run's placement: the summary, each cluster's DGD, then (a fleet past 1,000 clusters, whose
    decision explains only the clusters taking replicas) why the others took none, bounded."""
    from wingsmith.domain.placement import RuledOut
    from wingsmith.domain.placement.left_out import left_out
    lines = [f"placement: {placement['summary']}"]
    lines += [f"  {cluster}: DynamoGraphDeployment {m['metadata']['name']}" for cluster, m in manifests.items()]
    others = left_out([RuledOut.model_validate(g) for g in placement.get("ruled_out") or ()],
                      placement.get("passed_over") or [])
    if others:
        lines.append(f"the other {others.clusters} cluster(s):")
        lines += [f"  {line}" for line in others.lines()]
    return "\n".join(lines)


def _list(args) -> int:
    return call(args, "GET", "/v1/workloads", None, lambda d: table(
        ("ID", "STATE", "ARTIFACT", "TEAM", "CLUSTERS"),
        [(w["id"], w["state"], w["artifact_id"], w.get("team"),
          ", ".join(f"{x['cluster']}={x['replicas']} {x['state']}" for x in w["deployments"]))
         for w in d["workloads"]]) if d["workloads"] else "no workloads", prog="wingsmith workloads")


def condition_rows(conditions: list[dict]) -> list[tuple[str, str]]:
    """Kubernetes-style conditions, one line each: "Degraded  True  ClusterDegraded: sim-a: not ready"."""
    return [(f"condition {c['type']}", f"{c['status']}  {c['reason']}" + (f": {c['message']}" if c.get("message")
                                                                          else "")) for c in conditions]


def show_text(w: dict) -> str:
    """What `workloads show` prints: the failure first (it names each cluster's reason), then conditions,
    clusters and events."""
    live = w.get("live") or {}
    rows = [("id", w["id"]), ("state", live.get("stage") or w.get("state")), ("workflow", w.get("workflow_url"))]
    rows += [("failure", live["failure"])] if live.get("failure") else []
    # Conditions (Kubernetes-style): "Degraded  True  ClusterDegraded: sim-a: not ready", one line each.
    rows += condition_rows(live.get("conditions", []))
    for c in live.get("clusters", []):
        rows.append((f"cluster {c['cluster']}", f"{c['state']}, {c['replicas']} replica(s), {c.get('dgd_name')}, "
                                                f"{c.get('frontend_url') or c.get('error') or ''}"))
    rows += [("event", e) for e in reversed(live.get("events", [])[-10:])]  # newest first, as the console
    return pairs(rows)


def _show(args) -> int:
    return call(args, "GET", f"/v1/workloads/{args.id}", None, show_text, prog="wingsmith workloads")


def _scale(args) -> int:
    return call(args, "PATCH", f"/v1/workloads/{args.id}", {"replicas": args.replicas},
                lambda s: f"{args.id}: {s['replicas']} replica(s), {s['stage']}", prog="wingsmith workloads scale")


def _deciding_by(when: str | None) -> str:
    """While a step collects traffic: when it decides at the latest, in the console's words (its
    UpgradeInProgress condition)."""
    if not when:
        return ""
    try:
        at = datetime.fromisoformat(when)
    except ValueError:
        return f"; deciding by {when} at the latest"
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return f"; deciding by {at:%H:%M:%S} UTC at the latest"


def upgrade_text(u: dict) -> str:
    rows = [("upgrade", u["upgrade_id"]), ("state", u["state"] + (f" ({u['paused_reason']})" if u.get("paused_reason")
                                                                  else "")),
            ("from", u["from_artifact_id"]), ("to", u["to_artifact_id"])]
    for c in u.get("clusters", []):
        figures = (c.get("verdict") or {}).get("figures") or {}
        seen = (f"; new {figures.get('new_requests')} req, errors {figures.get('new_error_rate')}, old "
                f"{figures.get('old_requests')} req, errors {figures.get('old_error_rate')}" if figures else "")
        # A finished upgrade decides nothing more: its last step's deadline is history, not a promise.
        deciding = _deciding_by(c.get("decides_by")) if u["state"] in ("running", "paused") else ""
        rows.append((f"cluster {c['cluster']}", f"{c['phase']}, {c['new_weight_percent']}% new"
                                                + (" (surge)" if c.get("surge") else "") + seen + deciding))
    rows += [("failure", f) for f in u.get("failures", [])]
    return pairs(rows)


def _upgrade(args) -> int:
    prog = "wingsmith workloads upgrade"
    try:
        steps = [int(p) for p in args.steps.split(",") if p.strip()]
    except ValueError:
        print(f"{prog}: --steps takes percents separated by commas, e.g. 10,50,100", file=sys.stderr)
        return 2
    body = {"artifact_id": args.artifact_id, "steps": steps, "dwell_seconds": args.dwell, "reason": args.reason}
    seen: list[str] = []
    if args.wait:  # what happened before the upgrade is not its progress: follow from here on
        code, w = request(args, "GET", f"/v1/workloads/{args.id}", prog=prog)
        if code:
            return code
        seen = ((w or {}).get("live") or {}).get("events", [])
    code, data = request(args, "POST", f"/v1/workloads/{args.id}/upgrade", body, prog=prog)
    if code:
        return code
    print(upgrade_text(data["upgrade"]) + f"\n  watch {data['workflow_url']}", flush=True)
    if not args.wait:
        return 0
    deadline = time.monotonic() + 24 * 3600
    deciding: dict[str, str] = {}  # by cluster: the step's deadline last printed
    while time.monotonic() < deadline:
        code, w = request(args, "GET", f"/v1/workloads/{args.id}", prog=prog)
        if code:
            return code
        events = ((w or {}).get("live") or {}).get("events", [])
        for event in fresh_events(seen, events):
            print(f"  {event}", flush=True)
        seen = events or seen
        u = (w or {}).get("upgrade") or {}
        if u.get("upgrade_id") != data["upgrade"]["upgrade_id"]:
            time.sleep(1)
            continue
        if u.get("finished_at"):
            print(upgrade_text(u))
            return 0 if u["state"] == "succeeded" else 1
        # A step collecting light traffic says once when it will decide at the latest.
        for c in u.get("clusters", []):
            if c.get("decides_by") and deciding.get(c["cluster"]) != c["decides_by"]:
                deciding[c["cluster"]] = c["decides_by"]
                print(f"  {c['cluster']}: {c['new_weight_percent']}% new{_deciding_by(c['decides_by'])}", flush=True)
        time.sleep(1)
    return 1


def _control(args) -> int:
    return call(args, "POST", f"/v1/workloads/{args.id}/upgrade/{args.control}", {"reason": args.reason},
                upgrade_text, prog=f"wingsmith workloads {args.control}-upgrade")


def _delete(args) -> int:
    prog = "wingsmith workloads delete"
    code = call(args, "DELETE", f"/v1/workloads/{args.id}", None, lambda d: f"{args.id}: deleting", prog=prog)
    if code or not args.wait:
        return code
    return 0 if wait_for_stage(args, args.id, {"deleted"}, prog=prog) else 1


def _endpoint_create(args) -> int:
    prog = "wingsmith endpoints create"
    code = call(args, "POST", "/v1/endpoints", {"name": args.name, "workloads": args.workloads}, lambda d: (
        f"endpoint {d['name']} → {', '.join(d['workloads'])}\n  clients use {d['url']} with model {d['name']!r}"
        f"\n  {_published_text(d.get('published'), args.wait)}\n  watch {d['workflow_url']}"), prog=prog)
    if code or not args.wait:
        return code
    from wingsmith.cli.waiting import wait_until_published
    endpoint = wait_until_published(args, args.name, prog=prog)
    if endpoint is None:
        return 1
    print(f"  routed: the gateway sends {args.name!r} to {len(endpoint['routes'])} backend(s)", flush=True,
          file=sys.stderr if args.json else sys.stdout)
    return 0


def _published_text(published: bool | None, waiting: bool) -> str:
    if published:
        return "routed now: the gateway sends this name to its backends"
    if published is None:
        return "whether the gateway routes it yet could not be read"
    return ("not routed yet: the gateway answers model_not_found until a workload of it serves"
            + ("; waiting for it" if waiting else "; --wait returns once it is routed"))


def _endpoint_set_workloads(args) -> int:
    return call(args, "PATCH", f"/v1/endpoints/{args.name}", {"workloads": args.workloads},
                lambda d: f"endpoint {d['name']} → {', '.join(d['workloads'])}"
                          + (f"\n  draining {', '.join(d['draining'])} (weight 0 until in-flight requests finish)"
                             if d["draining"] else "") + f"\n  watch {d['workflow_url']}",
                prog="wingsmith endpoints set-workloads")


def _endpoint_list(args) -> int:
    return call(args, "GET", "/v1/endpoints", None, lambda d: table(
        ("NAME", "STATE", "TEAM", "WORKLOADS", "BACKENDS"),
        [(e["name"], e["state"], e.get("team"), ", ".join(e["workloads"]),
          ", ".join(f"{b['id']}×{b['weight']}" for b in e["routes"])) for e in d["endpoints"]])
        if d["endpoints"] else "no endpoints", prog="wingsmith endpoints")


def endpoint_text(e: dict) -> str:
    """What `endpoints show` prints: state, conditions, then each backend with its weight and health."""
    rows = [("name", e["name"]), ("state", e["state"]), ("workloads", ", ".join(e["workloads"])),
            ("workflow", e.get("workflow_url"))]
    rows += condition_rows(e.get("conditions") or [])
    health = {b["id"]: b for b in ((e.get("health") or {}).get("backends") or [])}
    for b in e["routes"]:
        h = health.get(b["id"], {})
        rows.append((f"backend {b['id']}", f"weight {b['weight']}, {b['url']}, healthy={h.get('healthy')}, "
                                           f"in flight={h.get('in_flight')}"))
    return pairs(rows)


def _endpoint_show(args) -> int:
    return call(args, "GET", f"/v1/endpoints/{args.name}", None, endpoint_text, prog="wingsmith endpoints")


def _endpoint_delete(args) -> int:
    return call(args, "DELETE", f"/v1/endpoints/{args.name}", None, lambda d: f"{args.name}: deleting",
                prog="wingsmith endpoints delete")

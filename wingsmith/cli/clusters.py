"""`wingsmith clusters add|list|show|update|remove|cordon|uncordon|check|role`: the cluster registry,
through the API.

Talks HTTP to a running API (found as wingsmith/cli/plane.py says) with the token api_client picks.
`check` runs a cluster's preflight again and prints its checklist (exit 1 when a check fails); `role`
prints, without asking the API, the Role and ClusterRole a member cluster grants the plane's user.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from wingsmith.cli.api_client import API_HELP, call, request


def register(sub) -> None:
    p = sub.add_parser("clusters", help="register, list, cordon and remove clusters")
    p.add_argument("--api", default=None, help=API_HELP)
    p.add_argument("--json", action="store_true", help="print the API's JSON instead of a table")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    add = verbs.add_parser("add", help="register a cluster (admin)")
    add.add_argument("name")
    add.add_argument("--kubeconfig", required=True, metavar="REF",
                     help="where the worker finds the kubeconfig: file:<path> inside the plane's kubeconfig "
                          "directory (WINGSMITH_KUBECONFIG_DIR), env:KUBECONFIG_<NAME> (the variable holds "
                          "the content) or secret:<namespace>/<name>[#<key>]")
    add.add_argument("--context", default="", help="context in the kubeconfig (default: its current-context)")
    add.add_argument("--region", default="")
    add.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    add.add_argument("--frontend-url", default="", help="base URL where its deployments' frontends are reachable")
    add.add_argument("--cordoned", action="store_true", help="register it cordoned (takes no replicas)")
    add.add_argument("--manual", action="append", default=[], metavar="HW=NODES[xGPUS]",
                     help="declare GPU nodes by hand (repeatable), e.g. h200=4 or gb200=16x4; "
                          "for clusters whose nodes carry no nvidia.com/gpu.product label")
    add.add_argument("--cost-per-gpu-hour", type=float, metavar="PRICE",
                     help="what one GPU-hour costs there (the organisation's one currency); plans sized from a "
                          "traffic target prefer the cheapest feasible card")
    add.set_defaults(func=_add)

    update = verbs.add_parser("update", help="change a cluster's cost per GPU-hour (admin)")
    update.add_argument("name")
    cost = update.add_mutually_exclusive_group(required=True)
    cost.add_argument("--cost-per-gpu-hour", type=float, metavar="PRICE", help="the new cost of one GPU-hour")
    cost.add_argument("--no-cost", action="store_true", help="forget the cost (unknown from now on)")
    update.set_defaults(func=_update)

    verbs.add_parser("list", help="list registered clusters").set_defaults(func=_list)
    role = verbs.add_parser("role", help="print the Role and ClusterRole a member cluster grants the plane's user")
    role.add_argument("--namespace", default="default", help="the deploy namespace (WINGSMITH_DEPLOY_NAMESPACE)")
    role.add_argument("--hf-token-secret", default="hf-token", help="the Hub token Secret's name "
                                                                    "(WINGSMITH_HF_TOKEN_SECRET)")
    role.add_argument("--user", default="wingsmith-plane", help="the kubeconfig's user the bindings name")
    role.set_defaults(func=_role)
    for verb, func, text in (("show", _show, "show one cluster"), ("remove", _remove, "unregister a cluster (admin)"),
                             ("cordon", _cordon, "stop placing new replicas on a cluster (admin)"),
                             ("uncordon", _uncordon, "let a cluster take replicas again (admin)"),
                             ("check", _check, "run a cluster's preflight again and print its checklist (admin); "
                                               "exit 1 when a check fails")):
        v = verbs.add_parser(verb, help=text)
        v.add_argument("name")
        v.set_defaults(func=func)
    # `--json` and `--api` are also accepted after the verb.
    for v in verbs.choices.values():
        v.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
        v.add_argument("--api", default=argparse.SUPPRESS, help="API base URL")


# --- verbs --------------------------------------------------------------------------------------------

def _add(args) -> int:
    try:
        labels = dict(_pair(x, "--label") for x in args.label)
        manual = [_manual(x) for x in args.manual]
    except ValueError as exc:
        print(f"wingsmith clusters add: {exc}", file=sys.stderr)
        return 2
    body = {"name": args.name, "kubeconfig": args.kubeconfig, "kube_context": args.context,
            "region": args.region, "labels": labels, "frontend_base_url": args.frontend_url,
            "cordoned": args.cordoned}
    if args.cost_per_gpu_hour is not None:
        body["cost_per_gpu_hour"] = args.cost_per_gpu_hour
    if manual:
        body["manual_inventory"] = {"pools": manual}
    return _checked(args, "/v1/clusters", body, lambda c: f"registered {c['name']}\n\n" + _detail(c))


def _list(args) -> int:
    return _call(args, "GET", "/v1/clusters", None, lambda data: _table(data["clusters"]))


def _show(args) -> int:
    return _call(args, "GET", f"/v1/clusters/{args.name}", None, _detail)


def _update(args) -> int:
    body = {"cost_per_gpu_hour": None if args.no_cost else args.cost_per_gpu_hour}
    return _call(args, "PATCH", f"/v1/clusters/{args.name}", body,
                 lambda c: f"updated {c['name']}: cost per GPU-hour {_cost_text(c)}")


def _check(args) -> int:
    return _checked(args, f"/v1/clusters/{args.name}/check", None,
                    lambda c: f"checked {c['name']}\n\n" + _checklist(c))


def _checked(args, path: str, body, render) -> int:
    """POST that answers a cluster with its checklist: exit 1 when a check failed (the cluster is registered,
    but takes no replicas until a check passes)."""
    code, data = request(args, "POST", path, body, prog="wingsmith clusters")
    if code:
        return code
    print(json.dumps(data, indent=2, default=str) if getattr(args, "json", False) else render(data))
    failed = [line for line in ((data.get("preflight") or {}).get("lines") or []) if line["status"] == "fail"]
    return 1 if failed else 0


def _role(args) -> int:
    import yaml

    from wingsmith.domain.member_clusters import rbac_manifests
    print(yaml.safe_dump_all(rbac_manifests(args.namespace, args.hf_token_secret or None, args.user),
                             sort_keys=False), end="")
    return 0


def _remove(args) -> int:
    return _call(args, "DELETE", f"/v1/clusters/{args.name}", None, lambda _: f"removed {args.name}")


def _cordon(args) -> int:
    return _call(args, "POST", f"/v1/clusters/{args.name}/cordon", None, lambda c: f"cordoned {c['name']}")


def _uncordon(args) -> int:
    return _call(args, "POST", f"/v1/clusters/{args.name}/uncordon", None, lambda c: f"uncordoned {c['name']}")


# --- parsing and rendering ----------------------------------------------------------------------------

def _pair(raw: str, flag: str) -> tuple[str, str]:
    key, sep, value = raw.partition("=")
    if not sep or not key:
        raise ValueError(f"{flag} {raw!r} must look like KEY=VALUE")
    return key, value


def _manual(raw: str) -> dict:
    m = re.fullmatch(r"([A-Za-z0-9]+)=(\d+)(?:x(\d+))?", raw)
    if not m:
        raise ValueError(f"--manual {raw!r} must look like HW=NODES or HW=NODESxGPUS (e.g. h200=4, gb200=16x4)")
    pool = {"hardware": m.group(1), "nodes": int(m.group(2))}
    if m.group(3):
        pool["gpus_per_node"] = int(m.group(3))
    return pool


def _inventory_text(c: dict) -> str:
    manual = c.get("manual_inventory")
    if not manual:
        return "live"
    from wingsmith.domain.hardware import get_hardware
    return "manual: " + ", ".join(
        f"{p['hardware']} {p['nodes']}x{p.get('gpus_per_node') or get_hardware(p['hardware']).gpus_per_node}"
        for p in manual["pools"])


def _cost_text(c: dict) -> str:
    cost = c.get("cost_per_gpu_hour")
    return "unknown" if cost is None else f"{cost:g}"


def _table(clusters: list[dict]) -> str:
    if not clusters:
        return "no clusters registered"
    rows = [("NAME", "REGION", "CORDONED", "INVENTORY", "CONTEXT", "LABELS")]
    for c in clusters:
        rows.append((c["name"], c["region"] or "-", "yes" if c["cordoned"] else "no", _inventory_text(c),
                     c["kube_context"] or "(current)",
                     ",".join(f"{k}={v}" for k, v in sorted(c["labels"].items())) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _detail(c: dict) -> str:
    rows = [("name", c["name"]), ("region", c["region"] or "-"),
            ("labels", ", ".join(f"{k}={v}" for k, v in sorted(c["labels"].items())) or "-"),
            ("kubeconfig", c["kubeconfig"]), ("context", c["kube_context"] or "(current-context)"),
            ("frontends", c["frontend_base_url"] or "-"), ("cordoned", "yes" if c["cordoned"] else "no"),
            ("inventory", _inventory_text(c)), ("cost per GPU-hour", _cost_text(c)),
            ("registered", c["created_at"]), ("updated", c["updated_at"])]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows) + "\n\n" + _checklist(c)


def _checklist(c: dict) -> str:
    """The cluster's last preflight, a line per check with what to do, and whether it may take replicas."""
    preflight = c.get("preflight")
    lines = []
    if c.get("check_not_run"):
        lines.append(f"not checked now: {c['check_not_run']}")
    if not preflight:
        lines.append("preflight: never checked (placeable; `wingsmith clusters check NAME` checks it)")
        return "\n".join(lines)
    failed = [line for line in preflight["lines"] if line["status"] == "fail"]
    verdict = (f"FAILED: {len(failed)} check(s) failed; the cluster takes no replicas until a check passes"
               if failed else "passed: the cluster may take replicas")
    lines.append(f"preflight {preflight['checked_at']}: {verdict}")
    for line in preflight["lines"]:
        lines.append(f"  {line['status'].upper():4}  {line['check']}: {line['detail']}")
        if line.get("fix"):
            lines.append(f"        fix: {line['fix']}")
    return "\n".join(lines)


# --- HTTP ---------------------------------------------------------------------------------------------

def _call(args, method: str, path: str, body, render) -> int:
    return call(args, method, path, body, render, prog="wingsmith clusters")

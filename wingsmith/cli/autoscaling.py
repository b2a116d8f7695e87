"""`wingsmith workloads autoscaling show|set|remove|approve`: a workload's autoscaling policy and what its
autoscaler decided, with the inputs (GET /v1/workloads/{id}/autoscaling; docs/autoscaling.md)."""

from __future__ import annotations

from typing import Any

from wingsmith.cli.api_client import add_common, call, pairs, table

POLICY_FLAGS = ("min_replicas", "max_replicas", "ttft_p95_ms", "tpot_p95_ms", "requests_per_second_per_replica",
                "scale_up_window_s", "scale_down_window_s", "cooldown_s")


def register(verbs) -> None:
    a = verbs.add_parser("autoscaling", help="a workload's autoscaling policy and its decisions")
    averbs = a.add_subparsers(dest="autoscaling_verb", metavar="VERB", required=True)
    show = averbs.add_parser("show", help="the policy and the last decisions, with their inputs")
    show.add_argument("id")
    show.add_argument("--limit", type=int, default=20)
    add_common(show)
    show.set_defaults(func=_show)
    s = averbs.add_parser("set", help="set the policy (operator)")
    s.add_argument("id")
    for flag in POLICY_FLAGS:
        s.add_argument(f"--{flag.replace('_', '-')}", type=float if flag.endswith("_ms") or "second" in flag else int,
                       required=flag == "max_replicas")
    s.add_argument("--approval-past-budget", action="store_true", help="a scale-out past the budget waits for "
                   "an approval instead of being held")
    add_common(s)
    s.set_defaults(func=_set)
    r = averbs.add_parser("remove", help="remove the policy: the replicas stay (operator)")
    r.add_argument("id")
    add_common(r)
    r.set_defaults(func=_remove)
    ap = averbs.add_parser("approve", help="let the scale-out waiting past the budget go ahead (approver)")
    ap.add_argument("id")
    ap.add_argument("tick", type=int, help="the decision waiting (`autoscaling show` names it)")
    ap.add_argument("--reject", action="store_true")
    ap.add_argument("--comment", default="")
    add_common(ap)
    ap.set_defaults(func=_approve)


def show_text(a: dict[str, Any]) -> str:
    policy = a.get("policy")
    rows = [("workload", a["workload_id"]), ("workflow", a["workflow_url"]),
            ("policy", ", ".join(f"{k} {v}" for k, v in policy.items() if v is not None) if policy else "none"),
            ("set by", a.get("set_by") or "-")]
    if a.get("waiting"):
        w = a["waiting"]
        rows.append(("waiting", f"decision {w['tick']}: {w['decision']['replicas_from']} → "
                                f"{w['decision']['replicas_to']} ({w['note']}); approve it with "
                                f"`wingsmith workloads autoscaling approve {a['workload_id']} {w['tick']}`"))
    decisions = table(("at", "outcome", "decision", "note"),
                      [(d["at"], d["outcome"], d["words"], d.get("note")) for d in a["decisions"]])
    return pairs(rows) + "\n\n" + decisions


def _show(args) -> int:
    return call(args, "GET", f"/v1/workloads/{args.id}/autoscaling", None, show_text,
                prog="wingsmith workloads autoscaling show", params={"limit": args.limit})


def _set(args) -> int:
    policy: dict[str, Any] = {f: getattr(args, f) for f in POLICY_FLAGS if getattr(args, f) is not None}
    policy["approval_past_budget"] = args.approval_past_budget
    return call(args, "PATCH", f"/v1/workloads/{args.id}", {"autoscaling": policy},
                lambda s: f"{args.id}: autoscaling set ({s['replicas']} replica(s) now)",
                prog="wingsmith workloads autoscaling set")


def _remove(args) -> int:
    return call(args, "PATCH", f"/v1/workloads/{args.id}", {"autoscaling": None},
                lambda s: f"{args.id}: autoscaling removed; {s['replicas']} replica(s) stay",
                prog="wingsmith workloads autoscaling remove")


def _approve(args) -> int:
    return call(args, "POST", f"/v1/workloads/{args.id}/autoscaling/approve",
                {"tick": args.tick, "approve": not args.reject, "comment": args.comment},
                lambda s: f"{args.id}: decision {args.tick} {'rejected' if args.reject else 'approved'}",
                prog="wingsmith workloads autoscaling approve", role="approver")

"""`wingsmith follow <workload> manual|auto`: whether approving a newer draft of the workload's branch
upgrades it by itself, through a running plane's API (`PATCH /v1/workloads/{id}/follow`)."""

from __future__ import annotations

from wingsmith.cli.api_client import add_common, call


def register(sub) -> None:
    f = sub.add_parser("follow", help="set a workload's follow policy: auto upgrades it when a newer draft of "
                       "its branch is approved; manual only notes it (operator)")
    f.add_argument("workload", help="workload id")
    f.add_argument("policy", choices=["manual", "auto"])
    add_common(f)
    f.set_defaults(func=_set)


def _set(args) -> int:
    return call(args, "PATCH", f"/v1/workloads/{args.workload}/follow", {"follow": args.policy},
                lambda d: f"{d['workload_id']}: follow {d['follow']} (set by {d['set_by']})", prog="wingsmith follow")

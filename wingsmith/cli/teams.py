"""`wingsmith teams quota set|show|remove`: a team's quota (GPUs per card, or `*` for every card, and optionally a
budget per hour) and what its workloads hold against it, through a running plane's API.

    wingsmith teams quota set red --gpus h200=64 --gpus '*=128' --budget 500
    wingsmith teams quota show red
    wingsmith teams quota remove red

Setting and removing is an admin's; a team reads its own quota, an admin every team's.
"""

from __future__ import annotations

import sys
from typing import Any

from wingsmith.cli.api_client import add_common, call, pairs, table

PROG = "wingsmith teams quota"


def register(sub) -> None:
    teams = sub.add_parser("teams", help="teams' quotas: GPUs per card and a budget per hour")
    nouns = teams.add_subparsers(dest="noun", metavar="NOUN", required=True)
    quota = nouns.add_parser("quota", help="set, show or remove a team's quota")
    verbs = quota.add_subparsers(dest="verb", metavar="VERB", required=True)

    put = verbs.add_parser("set", help="set or replace a team's quota (admin)")
    put.add_argument("team")
    put.add_argument("--gpus", action="append", default=[], metavar="CARD=N",
                     help="GPUs the team may hold of a card (h200, b200, gb200, ...), or of every card together "
                          "with '*=N' (repeatable); a card neither names is not limited")
    put.add_argument("--budget", type=float, metavar="PER_HOUR",
                     help="what the team's workloads may cost per hour, priced by the clusters' cost per GPU-hour")
    put.add_argument("--policy", choices=["refuse"], default="refuse",
                     help="what a request past the quota gets (refuse: 403 quota_exceeded, with the numbers)")
    put.set_defaults(func=_set)
    for verb, func, text in (("show", _show, "a team's quota and its use against it, per card and per hour"),
                             ("remove", _remove, "remove a team's quota: the team is not limited from then on "
                                                 "(admin)")):
        v = verbs.add_parser(verb, help=text)
        v.add_argument("team")
        v.set_defaults(func=func)
    for v in verbs.choices.values():
        add_common(v)


def _set(args) -> int:
    try:
        gpus = dict(gpus_of(raw) for raw in args.gpus)
    except ValueError as exc:
        print(f"{PROG} set: {exc}", file=sys.stderr)
        return 2
    if not gpus and args.budget is None:
        print(f"{PROG} set: give --gpus CARD=N (repeatable) and/or --budget PER_HOUR", file=sys.stderr)
        return 2
    body: dict[str, Any] = {"gpus": gpus, "budget_per_hour": args.budget, "policy": args.policy}
    return call(args, "PUT", f"/v1/teams/{args.team}/quota", body, quota_text, prog=f"{PROG} set")


def _show(args) -> int:
    return call(args, "GET", f"/v1/teams/{args.team}/quota", None, quota_text, prog=f"{PROG} show", role="viewer")


def _remove(args) -> int:
    return call(args, "DELETE", f"/v1/teams/{args.team}/quota", None,
                lambda _: f"removed team {args.team}'s quota: it is not limited any more", prog=f"{PROG} remove")


def gpus_of(raw: str) -> tuple[str, int]:
    card, sep, count = raw.partition("=")
    if not sep or not card or not count.strip().isdigit():
        raise ValueError(f"--gpus {raw!r} must look like CARD=N (h200=64), or '*=N' for every card together")
    return card.strip(), int(count)


def quota_text(answer: dict) -> str:
    """The quota, each limit with its use, and the use in GPUs per card and cost per hour."""
    quota, use = answer["quota"], answer["use"]
    held = ", ".join(f"{card} {n}" for card, n in use["gpus"].items()) or "none"
    unpriced = f" ({use['unpriced_gpus']} GPUs on clusters without a price)" if use["unpriced_gpus"] else ""
    rows = [("team", answer["team"]),
            ("quota", limits_text(quota) if quota else "none: nothing is limited"),
            ("set by", f"{answer['set_by']} at {answer['updated_at']}" if quota else None),
            ("use", f"{use['total_gpus']} GPUs ({held}) in {use['workloads']} workload(s), "
                    f"{use['cost_per_hour']:,.2f} per hour{unpriced}")]
    out = pairs(rows)
    if answer["lines"]:
        out += "\n\n" + table(("LIMIT", "USED", "QUOTA", "UNIT", "LEFT"), [
            (line["limit"], _num(line["used"]), _num(line["quota"]), line["unit"],
             _num(max(line["quota"] - line["used"], 0))) for line in answer["lines"]])
    return out + "\n\n" + answer["words"]


def limits_text(quota: dict) -> str:
    parts = [f"{card} ≤ {n} GPUs" for card, n in quota["gpus"].items()]
    if quota.get("budget_per_hour") is not None:
        parts.append(f"budget ≤ {quota['budget_per_hour']:,.2f} per hour")
    return ", ".join(parts) + f"; past it: {quota['policy']}"


def verdict_text(verdict: dict) -> str:
    """A dry run's quota verdict: the sentence, then a line per limit it touches."""
    from wingsmith.domain.quotas import Line, line_words
    return "\n".join([f"quota: {verdict['words']}",
                      *(f"  {line_words(Line.model_validate(line))}" for line in verdict["lines"])])


def _num(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"



"""`wingsmith watch list|pause|resume|trigger`: the Temporal Schedules watching each approved
repository's branch (`watch/<org>/<name>@<branch>`), through a running plane's API."""

from __future__ import annotations

from wingsmith.cli.api_client import add_common, call, table


def register(sub) -> None:
    w = sub.add_parser("watch", help="the watch on upstream: a schedule per approved repository and branch")
    verbs = w.add_subparsers(dest="verb", metavar="VERB", required=True)
    ls = verbs.add_parser("list", help="every watch, paused or not, with its next and recent runs")
    add_common(ls)
    ls.set_defaults(func=_list)
    for verb, text in (("pause", "stop checking (operator)"), ("resume", "check again (operator)"),
                       ("trigger", "check now: a new commit opens a new draft (operator)")):
        v = verbs.add_parser(verb, help=text)
        v.add_argument("watch", help="<org>/<name>@<branch>, or the schedule id watch/<org>/<name>@<branch>")
        add_common(v)
        v.set_defaults(func=_act, action=verb)


def _list(args) -> int:
    return call(args, "GET", "/v1/watches", None, lambda d: table(
        ("WATCH", "PAUSED", "NEXT RUN", "LAST RUN"),
        [(w["id"], "yes" if w["paused"] else "no", (w["next_runs"] or ["-"])[0],
          w["recent_runs"][-1]["at"] if w["recent_runs"] else "-") for w in d["watches"]])
        if d["watches"] else "no watches (one starts when an artifact of a branch is approved)", prog="wingsmith watch")


def _act(args) -> int:
    target = args.watch.removeprefix("watch/")
    return call(args, "POST", f"/v1/watches/{target}/{args.action}", None,
                lambda d: f"{d['id']}: {args.action} ({'paused' if d['paused'] else 'active'})",
                prog=f"wingsmith watch {args.action}")

"""`wingsmith register <source>`, `wingsmith artifacts list|show`, `wingsmith review <id> approve|reject`:
the draft review, through a running plane's API."""

from __future__ import annotations

import time

from wingsmith.cli.api_client import add_common, call, pairs, request, table
from wingsmith.cli.evidence import evidence_rows, sizing_rows


def register(sub) -> None:
    p = sub.add_parser("register", help="register an artifact and start its review (operator)")
    p.add_argument("source", help="hf:<org>/<name>[@rev], a huggingface.co URL or <org>/<name>")
    p.add_argument("--wait", action="store_true", help="wait until the draft is ready for review")
    add_common(p)
    p.set_defaults(func=_register)

    a = sub.add_parser("artifacts", help="list and show artifacts")
    verbs = a.add_subparsers(dest="verb", metavar="VERB", required=True)
    ls = verbs.add_parser("list", help="list artifacts")
    ls.add_argument("--state")
    ls.add_argument("--model")
    add_common(ls)
    ls.set_defaults(func=_list)
    show = verbs.add_parser("show", help="show an artifact's draft, warnings and decision")
    show.add_argument("id", help="<org>/<name>@<sha>")
    add_common(show)
    show.set_defaults(func=_show)

    r = sub.add_parser("review", help="approve or reject a draft (approver)")
    r.add_argument("id", help="<org>/<name>@<sha>")
    r.add_argument("decision", choices=["approve", "reject"])
    r.add_argument("--comment", default="")
    r.add_argument("--version", type=int, help="the draft version you read (default: the current one)")
    r.add_argument("--variant")
    r.add_argument("--feature", action="append", default=[], help="an opt-in feature to enable (repeatable)")
    add_common(r)
    r.set_defaults(func=_review)


def _register(args) -> int:
    prog = "wingsmith register"
    code, data = request(args, "POST", "/v1/artifacts", {"source": args.source}, prog=prog)
    if code:
        return code
    verb = "registered" if data["started"] else "already registered"
    print(f"{verb} {data['id']}\n  workflow  {data['workflow_id']}\n  watch     {data['workflow_url']}")
    if args.wait:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            code, art = request(args, "GET", f"/v1/artifacts/{data['id']}", prog=prog)
            if code == 0 and art.get("state") not in (None, "resolving"):
                draft = f" (draft v{art['draft']['version']})" if art.get("draft") else ""
                print(f"  state     {art['state']}{draft}")
                for w in (art.get("draft") or {}).get("warnings", []):
                    print(f"  warning   {w}")
                return 0
            print(".", end="", flush=True)
            time.sleep(1)
        print("\nstill resolving after 5 minutes; see the workflow link above")
        return 1
    return 0


def _list(args) -> int:
    params = {k: v for k, v in (("state", args.state), ("model", args.model)) if v}
    return call(args, "GET", "/v1/artifacts", None, lambda d: table(
        ("ID", "STATE", "DRAFT", "REQUESTED BY", "UPDATED"),
        [(a["id"], a["state"], a.get("draft_version"), a["requested_by"], str(a["updated_at"])[:19])
         for a in d["artifacts"]]) if d["artifacts"] else "no artifacts", prog="wingsmith artifacts", params=params)


def _show(args) -> int:
    def render(a: dict) -> str:
        draft = a.get("draft") or {}
        review = a.get("review") or {}
        rows = [("id", a["id"]), ("state", a["state"]), ("requested by", a.get("requested_by")),
                ("draft", f"v{draft['version']} (catalog {draft['catalog_version']})" if draft else None),
                ("decision", f"{review['decision']} by {review['reviewer']} via {review['via']}: {review['comment']}"
                 if review else None), ("workflow", a.get("workflow_url"))]
        rows += evidence_rows(draft.get("evidence"))
        rows += sizing_rows(draft.get("sizing"), draft.get("warnings", []))
        if diff := a.get("diff"):  # what moved since the approved artifact the draft was opened from
            rows.append(("against", diff.get("against")))
            rows.append(("changed", ", ".join(diff.get("changed") or []) or "nothing the plane reads"))
        return pairs(rows)
    return call(args, "GET", f"/v1/artifacts/{args.id}", None, render, prog="wingsmith artifacts")


def _review(args) -> int:
    prog = "wingsmith review"
    version = args.version
    if version is None:
        code, art = request(args, "GET", f"/v1/artifacts/{args.id}", prog=prog)
        if code:
            return code
        version = (art.get("draft") or {}).get("version") or 1
    body = {"decision": args.decision, "comment": args.comment, "draft_version": version,
            "selections": {"variant": args.variant, "features": args.feature}}
    return call(args, "POST", f"/v1/artifacts/{args.id}/review", body,
                lambda s: f"{args.id}: {s['stage']} by {s['decision']['reviewer']}", prog=prog, role="approver")

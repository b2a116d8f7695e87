"""`wingsmith hub commit <org/name> --set KEY=VALUE ...`: make a new commit on `main` of a model in the
offline Hub (`wingsmith up --offline-hub`), changing keys of its config.json, and print the new sha.
The real Hub has no such route: this is how a model "moves upstream" on a machine without internet.
`wingsmith hub list`: every repo of the offline Hub, where its main points, and the commits made on
this machine (kept under `$WINGSMITH_HOME/hub`, so they outlive a restart)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from wingsmith.adapters.http_tls import default_tls
from wingsmith.cli.plane import hub_endpoint


def register(sub) -> None:
    h = sub.add_parser("hub", help="the offline Hub of a local plane")
    verbs = h.add_subparsers(dest="verb", metavar="VERB", required=True)
    c = verbs.add_parser("commit", help="a new commit on main changing config.json keys (offline Hub only)")
    c.add_argument("repo_id", help="<org>/<name>")
    c.add_argument("--set", dest="changes", action="append", required=True, metavar="KEY=VALUE",
                   help="a config.json key (dotted for nested) and its value, read as JSON if it parses "
                        "(repeatable)")
    c.set_defaults(func=_commit)
    ls = verbs.add_parser("list", help="repos, where main points, and the commits made here (offline Hub only)")
    ls.set_defaults(func=_list)


def parse_change(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--set wants KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw  # a bare word is a string
    return key.strip(), value


def _commit(args) -> int:
    prog = "wingsmith hub commit"
    try:
        changes = dict(parse_change(c) for c in args.changes)
    except argparse.ArgumentTypeError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    answer = _ask(prog, "POST", f"/_sim/commit/{args.repo_id}", {"set": changes})
    if isinstance(answer, int):
        return answer
    print(answer["sha"])
    return 0


def _list(args) -> int:
    answer = _ask("wingsmith hub list", "GET", "/_sim/repos")
    if isinstance(answer, int):
        return answer
    for repo in answer:
        print(f"{repo['id']}  main {repo['sha']}")
        for commit in repo["commits"]:
            if commit["op"] == "commit":
                changed = ", ".join(f"{k}={json.dumps(v)}" for k, v in commit["set"].items())
                print(f"  {commit['sha']}  {commit['at']}  from {commit['parent'][:12]}: {changed}")
            else:
                print(f"  {commit['sha']}  main moved here")
    return 0


def _ask(prog: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The offline Hub's answer, or the exit code after saying why there is none."""
    import httpx

    base = hub_endpoint().rstrip("/")
    try:
        r = httpx.request(method, f"{base}{path}", json=body, timeout=10, verify=default_tls())
    except httpx.HTTPError as exc:
        print(f"{prog}: the Hub at {base} is not reachable ({type(exc).__name__})", file=sys.stderr)
        return 1
    if r.status_code != 200:
        message = r.headers.get("X-Error-Message") or r.text[:200]
        if r.status_code == 404 and "no route" in message:
            message = f"{base} is not the offline Hub (start the plane with `wingsmith up --offline-hub`)"
        print(f"{prog}: {message}", file=sys.stderr)
        return {400: 2, 403: 4, 404: 3}.get(r.status_code, 1)
    return r.json()

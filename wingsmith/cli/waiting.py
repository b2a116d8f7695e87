"""What the CLI waits for after the API has answered at once (issue 52), printing progress as it goes:

- a traffic plan: `POST /v1/workloads` sized by traffic answers 202 `state: planning` with a status URL while
  AIConfigurator searches (minutes when not cached); `follow_plan` reads that URL until it answers with the
  plan, printing which card is being planned;
- an endpoint's routes: `POST /v1/endpoints` answers before the gateway routes the name (its workflow
  publishes the routes once a workload serves); `wait_until_published` reads the endpoint until the gateway
  routes it, so the first chat after it is answered, not `model_not_found`.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from wingsmith.cli.api_client import request

# The API gives a plan two hours (contracts/traffic_plan.py PLAN_TIMEOUT); the CLI waits as long.
PLAN_WAIT_SECONDS = 7200.0
# What the API's status URL asks for between two looks (its Retry-After).
LOOK_EVERY_SECONDS = 2.0
# A search that says nothing new for this long is still said to be running, so a person sees it is alive.
STILL_EVERY_SECONDS = 30.0


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def progress_text(progress: dict, cards: list[str]) -> str:
    """One line of a plan's progress, in words: "searching gb200 (1 of 2 cards planned: h200), 54 s"."""
    seconds = f"{progress.get('seconds') or 0:.0f} s"
    if progress["state"] == "starting":
        return f"starting: asking whether a perf worker polls its queue, {seconds}"
    if progress["state"] == "queued":
        return f"waiting for the perf worker (it is searching for other plans), {seconds}"
    planned = progress.get("planned") or []
    done = f"{len(planned)} of {len(cards)} cards planned" + (f": {', '.join(planned)}" if planned else "")
    return f"searching {progress.get('searching') or '?'} ({done}), {seconds}"


def follow_plan(args, planning: dict, *, prog: str, timeout: float = PLAN_WAIT_SECONDS) -> tuple[int, Any]:
    """Read a plan's status URL until it answers (exit code and body, as `request` gives them), printing
    its progress on stderr each time it changes (and every half minute while a search runs)."""
    _say(f"{prog}: planning on {', '.join(planning['cards'])}: workflow {planning['workflow_id']}\n"
         f"  watch {planning['workflow_url']}\n  status {planning['status_url']}")
    said, said_at = "", 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, data = request(args, "GET", planning["status_url"], prog=prog)
        if code or not (isinstance(data, dict) and data.get("state") == "planning"):
            return code, data
        line = progress_text(data["progress"], planning["cards"])
        news = line.rsplit(", ", 1)[0]  # without the seconds
        if news != said or time.monotonic() - said_at >= STILL_EVERY_SECONDS:
            _say(f"  {line}")
            said, said_at = news, time.monotonic()
        time.sleep(LOOK_EVERY_SECONDS)
    _say(f"{prog}: the plan did not answer within {timeout:.0f} s; follow it at {planning['status_url']}")
    return 1, None


def wait_until_published(args, name: str, *, prog: str, timeout: float = 1800) -> dict | None:
    """Read the endpoint until the gateway routes its name (`published`), printing its state as it changes;
    the endpoint as last read, or None when it never was within `timeout` seconds."""
    said = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, endpoint = request(args, "GET", f"/v1/endpoints/{name}", prog=prog, quiet=True)
        if code == 0 and endpoint.get("published"):
            return endpoint
        available = next((c for c in (endpoint or {}).get("conditions") or [] if c["type"] == "Available"), None)
        line = (f"not routed yet: {available['reason']}" + (f" ({available['message']})" if available.get("message")
                                                             else "")) if available else "not routed yet"
        if line != said:
            _say(f"  {name}: {line}")
            said = line
        time.sleep(0.5)
    _say(f"{prog}: the gateway did not route {name} within {timeout:.0f} s")
    return None

"""A traffic plan's status URL carries its ticket: the request and the cards planned, compressed, so that any
API replica answers it without a table (issue 52). Anything else is no ticket, refused before it is inflated
past its bound. Pure."""

from __future__ import annotations

import base64
import zlib
from datetime import UTC, datetime, timedelta

from wingsmith.adapters.traffic_plans import MAX_TICKET_CHARS, STARTING_WITHIN, PlanTicket
from wingsmith.domain.workloads import WorkloadRequest

TARGET = {"requests_per_second": 0.1, "isl": 4000, "osl": 1000, "ttft_ms": 2000, "tpot_ms": 40}


def _ticket(**change) -> PlanTicket:
    request = WorkloadRequest(artifact_id="moonshotai/Kimi-K3@" + "a" * 40, hardware="h200", target=TARGET,
                              name="kimi-t")
    fields = {"request": request.model_dump(mode="json", exclude_unset=True), "cards": ["h200", "gb200"],
              "issued": datetime.now(UTC)} | change
    return PlanTicket(**fields)


def test_a_ticket_reads_back_as_it_was_given_and_fits_in_a_url() -> None:
    ticket = _ticket()
    text = ticket.encode()
    assert PlanTicket.decode(text) == ticket
    assert len(text) < 400 and all(c.isalnum() or c in "-_" for c in text), text
    # The request it carries is the request again, its sizing (a target, no replicas) as it was sent.
    again = WorkloadRequest.model_validate(PlanTicket.decode(text).request)  # type: ignore[union-attr]
    assert again.target is not None and "replicas" not in again.model_fields_set


def test_anything_else_is_no_ticket() -> None:
    text = _ticket().encode()
    bomb = base64.urlsafe_b64encode(zlib.compress(b"{" + b" " * 5_000_000 + b"}", 9)).decode().rstrip("=")
    assert len(bomb) < MAX_TICKET_CHARS  # small on the wire, five megabytes inflated: refused at the bound
    for other in ("not-a-ticket", text[:-5], text + "x" * MAX_TICKET_CHARS, bomb, "", "%%%"):
        assert PlanTicket.decode(other) is None, other


def test_a_young_ticket_s_plan_may_still_be_starting() -> None:
    assert _ticket().young()
    assert not _ticket(issued=datetime.now(UTC) - STARTING_WITHIN - timedelta(seconds=1)).young()

"""A fleet past 1,000 clusters gets a compact decision (full verdicts only for the clusters taking
replicas): the workload check and the CLI's dry run still say why every other cluster took none, by
the largest ruled-out groups and the clusters passed over, a few names each, escaped and bounded."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from console.new_workload import Check
from console.rendering import templates
from tests.placement.test_index import busy_fleet
from wingsmith.cli.workloads import placement_text
from wingsmith.domain.placement import ClusterInventory, PlacementConstraints, PlacementPlan, place
from wingsmith.domain.placement.left_out import SHOWN_GROUPS, SHOWN_NAMES, left_out

HOSTILE = "<script>alert('x')</script> & friends"


def compact_decision():
    inventories, infos = busy_fleet(3_000, seed=5)
    # Many distinct inventory errors: more ruled-out groups than the check shows, one of them hostile.
    broken = {f"cluster-{i:05d}": f"error {i % 12}" + (HOSTILE if i % 12 == 0 else "") for i in range(0, 600, 7)}
    inventories = [ClusterInventory(cluster=inv.cluster, error=broken[inv.cluster]) if inv.cluster in broken else inv
                   for inv in inventories]
    plan = PlacementPlan(hardware="h200", gpus_per_node=8, nodes_per_replica=2, replicas=6,
                         constraints=PlacementConstraints(regions=["us-east", "eu-west"]))
    decision = place(plan, inventories, infos)
    assert decision.placed == 6 and len(decision.clusters) < 10  # compact: only the clusters taking replicas
    assert len(decision.ruled_out) > SHOWN_GROUPS and len(decision.passed_over) > SHOWN_NAMES
    return decision


class Items(HTMLParser):
    """The text of each <li> under #check-left-out, by its id or data-filter."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.items: list[tuple[dict[str, str | None], list[str]]] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.scripts += tag == "script"
        if tag == "ul" and a.get("id") == "check-left-out":
            self.inside = True
        elif tag == "li" and self.inside:
            self.items.append((a, []))

    def handle_endtag(self, tag):
        if tag == "ul":
            self.inside = False

    def handle_data(self, data):
        if self.inside and self.items:
            self.items[-1][1].append(data)

    def texts(self) -> list[tuple[dict[str, str | None], str]]:
        return [(a, "".join(parts)) for a, parts in self.items]


def test_the_check_shows_every_other_cluster_grouped_escaped_and_bounded():
    decision = compact_decision()
    others = left_out(decision.ruled_out, decision.passed_over)
    assert others is not None
    # The check's plan part is not under test here: only what the placement table says.
    plan: Any = {"fit": {"checked": False, "reason": "not checked"}, "served_model_name": "m", "max_num_seqs": None,
            "max_num_seqs_source": "engine default"}
    check = Check.model_construct(refusal=None, target_plan=None, unplanned_target=False, plan=plan,
                                  placement=decision, left_out=others)
    html = templates.get_template("_workload_check.html").render(check=check)
    parsed = Items()
    parsed.feed(html)
    items = parsed.texts()
    assert parsed.scripts == 0 and "&lt;script&gt;" in html
    groups = sorted(decision.ruled_out, key=lambda g: -len(g.clusters))
    ruled = [(a, text) for a, text in items if "data-filter" in a]
    assert [(a["data-filter"], int(a["data-count"] or 0)) for a, _ in ruled] == \
           [(g.filter, len(g.clusters)) for g in groups[:SHOWN_GROUPS]]
    for (_, text), group in zip(ruled, groups, strict=False):
        assert group.reason in text and ", ".join(group.clusters[:SHOWN_NAMES]) in text
        assert group.clusters[SHOWN_NAMES] not in text if len(group.clusters) > SHOWN_NAMES else True
    hidden = next(text for a, text in items if a.get("id") == "check-left-out-hidden")
    assert f"{sum(len(g.clusters) for g in groups[SHOWN_GROUPS:]):,} more cluster(s)" in hidden
    passed = next(text for a, text in items if a.get("id") == "check-passed-over")
    assert f"{len(decision.passed_over):,} passed over" in passed
    assert ", ".join(decision.passed_over[:SHOWN_NAMES]) in passed
    assert f"and {len(decision.passed_over) - SHOWN_NAMES:,} more" in passed
    # Every cluster is counted once: the verdicts in the table plus the groups below.
    assert len(decision.clusters) + others.clusters == 3_000
    assert len(html) < 20_000  # bounded whatever the fleet's size


def test_a_small_fleet_explained_in_full_adds_nothing():
    inventories, infos = busy_fleet(50, seed=5)
    decision = place(PlacementPlan(hardware="h200", gpus_per_node=8, replicas=2), inventories, infos, explain=True)
    assert left_out(decision.ruled_out, decision.passed_over) is None
    assert "the other" not in placement_text(decision.model_dump(mode="json"), {})


def test_the_cli_dry_run_prints_the_same_groups():
    decision = compact_decision()
    text = placement_text(decision.model_dump(mode="json"),
                          {"cluster-x": {"metadata": {"name": "dgd-x"}}})
    lines = text.splitlines()
    assert lines[0] == f"placement: {decision.summary}" and lines[1] == "  cluster-x: DynamoGraphDeployment dgd-x"
    assert lines[2] == f"the other {3_000 - len(decision.clusters)} cluster(s):"
    biggest = max(decision.ruled_out, key=lambda g: len(g.clusters))
    assert lines[3].startswith(
        f"  {len(biggest.clusters)} cluster(s) ruled out by {biggest.filter}: {biggest.reason} (")
    assert len(lines) == 3 + SHOWN_GROUPS + 2  # the shown groups, the hidden ones in one line, the passed over
    assert lines[-1].startswith(f"  {len(decision.passed_over)} cluster(s) passed over: ")
    assert f"and {len(decision.passed_over) - SHOWN_NAMES} more)" in lines[-1]

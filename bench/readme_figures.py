"""The README's table of current figures, written from one `bench/report.py --json` report, so what the
README says and what the code measured cannot drift: tests/test_readme_figures.py holds the README's table to
the report its marker names.

    .venv/bin/python bench/readme_figures.py --measure [--note TEXT]   # a release: bench/report.py, every measure,
                                                                       # 3 runs, into bench/figures-<version>.json,
                                                                       # then the README's table from it
    .venv/bin/python bench/readme_figures.py [REPORT.json]             # the table from a recorded report
    .venv/bin/python bench/readme_figures.py --check                   # exit 1 unless the table is its report's
    .venv/bin/python bench/readme_figures.py --merge OTHER.json        # the measures OTHER.json ran replace the
                                                                       # release report's, named in its note; then
                                                                       # the README's table from it

The table sits in README.md between `<!-- figures: <report> ... -->` and `<!-- /figures -->`; the first
marker names the report (a path from the repository's root) it was written from.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules, as when run directly

import report as bench_report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
END = "<!-- /figures -->"
BLOCK = re.compile(r"<!-- figures: (\S+) [^\n]*-->\n(.*?)" + re.escape(END), flags=re.S)
HEADER = ("| measure | figure: worst run (median) | target | met | conditions |\n"
          "|---|---|---|---|---|")


def default_report_path() -> Path:
    """bench/figures-<version>.json: one recorded report per release, named by pyproject.toml's version."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return ROOT / "bench" / f"figures-{version}.json"


def _figure(value: float, unit: str) -> str:
    return f"{value:.2f}{unit}"


def _runs_of(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The runs of the measure a headline figure belongs to (report.py files them by measure)."""
    return next((runs for runs in report.get("runs", {}).values() if any(key in run for run in runs)), [])


def _conditions(report: dict[str, Any], key: str) -> str:
    runs = _runs_of(report, key)
    count = len(runs) or report["runs_per_measure"]
    loads = [run[f"load_average_at_{edge}"][0] for run in runs for edge in ("start", "end")
             if f"load_average_at_{edge}" in run]
    load = f"1-min load {min(loads):.1f}–{max(loads):.1f}" if loads else "load not recorded"
    smoke = "; quick: a smoke run, not a figure" if report.get("quick") else ""
    return f"{count} run{'' if count == 1 else 's'}, {report['machine']['cpus']} CPUs, {load}{smoke}"


def _not_measured(report: dict[str, Any], key: str) -> str:
    if key == "perf_cached_estimate_ms" and isinstance(report.get("perf"), str):
        return f"not measured: {report['perf']}"
    litellm = report["gateway"].get("litellm") if isinstance(report.get("gateway"), dict) else None
    if key == "gateway_vs_litellm_throughput" and litellm == "not installed":
        return f"not measured: LiteLLM not installed ({bench_report.LITELLM_ENV})"
    return "not measured in this report"


def row(report: dict[str, Any], key: str) -> str:
    label, unit = bench_report.HEADLINES[key]
    bound = "≥" if key in bench_report.AT_LEAST else "≤"
    target = f"{bound} {bench_report.TARGETS[key]:g}{unit}"
    if key not in report:
        return f"| {label} | {_not_measured(report, key)} | {target} | – | |"
    figure = f"{_figure(report[key], unit)} ({_figure(report['median'][key], unit)})"
    met = "yes" if report["met"][key] else "**no**"
    return f"| {label} | {figure} | {target} | {met} | {_conditions(report, key)} |"


def render(report: dict[str, Any]) -> str:
    """The README's table (every headline of bench/report.py, measured or not) and where it came from."""
    machine = report["machine"]
    lines = [HEADER, *(row(report, key) for key in bench_report.HEADLINES), "",
             f"From `{report['command']}`, started {report['started_at']} ({machine['cpus']} CPUs, "
             f"Python {machine['python']}).", *([report["note"]] if report.get("note") else [])]
    return "\n".join(lines) + "\n"


# What a report says about itself rather than about a measure: kept from the release report on a merge.
_OF_THE_REPORT = frozenset({"command", "started_at", "machine", "quick", "runs_per_measure", "note"})
_BY_FIGURE = ("median", "met", "targets", "runs")


def merged(report: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """`report` with the measures `other` ran added: a measure only `other` ran is taken whole (figures, details,
    medians, verdicts, runs); one both ran has the runs of both, judged again as bench/report.py judges its
    runs (the worst of all, the median of all, the worst run's details). A sentence in the note names the
    command, time and machine they came from. So a measure added after the release run, or run again beside
    other work, joins the release's report without every other measure being run again."""
    measures = sorted(other.get("runs", {}))
    if not measures:
        raise ValueError("the report to merge has no runs")
    out = {**report, **{k: v for k, v in other.items() if k not in _OF_THE_REPORT and k not in _BY_FIGURE}}
    for key in _BY_FIGURE:
        out[key] = {**report.get(key, {}), **other.get(key, {})}
    for measure in measures:
        before = report.get("runs", {}).get(measure)
        if before:
            _add_runs(out, report, other, measure, before)
    machine = other["machine"]
    said = (f"The {', '.join(measures)} rows: from `{other['command']}`, started {other['started_at']} "
            f"({machine['cpus']} CPUs, Python {machine['python']}){'; ' + other['note'] if other.get('note') else ''}.")
    out["note"] = f"{report['note']} {said}" if report.get("note") else said
    return out


def _add_runs(out: dict[str, Any], report: dict[str, Any], other: dict[str, Any], measure: str,
              before: list[dict[str, Any]]) -> None:
    runs = [*before, *other["runs"][measure]]
    keys = [k for k in bench_report.TARGETS if any(k in run for run in runs)]
    out["runs"][measure] = runs
    # The worst run's details stay with the report whose worst run is the worse (report.py's rule).
    if max(bench_report._against_target(k, report[k]) for k in keys) >= max(
            bench_report._against_target(k, other[k]) for k in keys):
        out.update({k: v for k, v in report.items() if k not in _OF_THE_REPORT and k not in _BY_FIGURE
                    and k not in bench_report.TARGETS and k in other})
    for key in keys:
        values = [run[key] for run in runs if key in run]
        out[key] = (min if key in bench_report.AT_LEAST else max)(values)
        out["median"][key] = round(statistics.median(values), 3)
        out["targets"][key] = bench_report.TARGETS[key]
        out["met"][key] = (out[key] >= out["targets"][key] if key in bench_report.AT_LEAST
                           else out[key] <= out["targets"][key])


def recorded(readme: str) -> tuple[str, str]:
    """The report the README's table names, and the table as it stands."""
    found = BLOCK.search(readme)
    if not found:
        raise ValueError(f"README.md has no `<!-- figures: <report> ... -->` ... `{END}` block")
    return found.group(1), found.group(2)


def write(readme: str, report: dict[str, Any], source: str) -> str:
    """The README with its table made from `report` and its marker naming `source`."""
    recorded(readme)  # refuses a README without the block, rather than appending one somewhere
    marker = f"<!-- figures: {source} (written by bench/readme_figures.py from that report; do not edit) -->"
    return BLOCK.sub(lambda _: f"{marker}\n{render(report)}{END}", readme, count=1)


def _source(path: Path) -> str:
    """How the README's marker names a report: from the repository's root (a report elsewhere, absolute)."""
    resolved = path.resolve()
    return resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else resolved.as_posix()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the README's table of current figures from a report.")
    parser.add_argument("report", nargs="?", type=Path,
                        help=f"a bench/report.py --json file (default {_source(default_report_path())})")
    parser.add_argument("--measure", action="store_true", help="run bench/report.py into REPORT first")
    parser.add_argument("--runs", type=int, default=3, help="with --measure: runs of each measure (default 3)")
    parser.add_argument("--note", help="with --measure: what the load figures cannot say (e.g. 'quiet machine')")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 unless the table is its report's")
    parser.add_argument("--merge", type=Path, metavar="OTHER",
                        help="take the measures OTHER (a bench/report.py --json file) ran into REPORT, then the table")
    parser.add_argument("--readme", type=Path, default=README, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    readme = args.readme.read_text()
    if args.check:
        source, table = recorded(readme)
        if table != render(json.loads((ROOT / source).read_text())):
            print(f"README.md's figures are not {source}'s: run .venv/bin/python bench/readme_figures.py {source}",
                  file=sys.stderr)
            return 1
        return 0
    path = args.report or default_report_path()
    if args.merge:
        path.write_text(json.dumps(merged(json.loads(path.read_text()), json.loads(args.merge.read_text())),
                                   indent=2) + "\n")
    if args.measure:
        bench_report.main(["--runs", str(args.runs), "--json", str(path)])
        if args.note:
            measured = json.loads(path.read_text())
            path.write_text(json.dumps({**measured, "note": args.note}, indent=2) + "\n")
    args.readme.write_text(write(readme, json.loads(path.read_text()), _source(path)))
    print(f"{args.readme.name}: figures from {_source(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

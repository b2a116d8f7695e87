"""Every command the CLI takes is listed, with a line of words, in its parent's `--help` (issue 52: `wingsmith
endpoints show` worked but `wingsmith endpoints --help` did not list it). argparse lists a sub-command only
when it was added with `help=`, so a verb without one works and stays invisible."""

from __future__ import annotations

import argparse

from wingsmith.cli.main import build_parser


def _unlisted(parser: argparse.ArgumentParser, path: str) -> list[str]:
    """Sub-commands under `parser` (at any depth) that its help does not list."""
    missing = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        listed = {a.dest for a in action._choices_actions}
        for name, sub in action.choices.items():
            if name not in listed:
                missing.append(f"{path} {name}")
            missing += _unlisted(sub, f"{path} {name}")
    return missing


def test_every_verb_is_listed_in_its_parents_help():
    assert _unlisted(build_parser(), "wingsmith") == []


def test_endpoints_help_lists_show_and_delete(capsys):
    parser = build_parser()
    try:
        parser.parse_args(["endpoints", "--help"])
    except SystemExit:
        pass
    listed = capsys.readouterr().out
    for verb in ("create", "set-workloads", "list", "show", "delete"):
        assert f"\n    {verb}" in listed, listed

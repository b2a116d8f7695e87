"""The `wingsmith` command. Each command group lives in its own module in this package and exposes
`register(subparsers)`, which adds its parser and sets `func` (returning an exit code)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMAND_MODULES = ["up", "demo", "resolve", "artifacts", "workloads", "follow", "recipes", "size", "clusters", "hub",
                   "watch"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wingsmith", description=(
        "Wingsmith: Hugging Face model → multi-cluster NVIDIA Dynamo endpoint, with a person in the loop."))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"wingsmith.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        code = 2
    else:
        try:
            code = int(args.func(args) or 0)
        except KeyboardInterrupt:
            code = 130
    sys.stdout.flush()
    sys.stderr.flush()
    # A process that used a Temporal client can abort at interpreter exit (an open SDK issue);
    # leaving through os._exit keeps the exit code true.
    os._exit(code)


if __name__ == "__main__":
    main()

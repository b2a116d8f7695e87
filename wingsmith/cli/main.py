"""The `wingsmith` command. Each command group lives in its own module in this package and exposes
`register(subparsers)`, which adds its parser and sets `func` (returning an exit code)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from wingsmith.adapters.version import describe

COMMAND_MODULES = ["up", "demo", "resolve", "artifacts", "workloads", "follow", "recipes", "size", "clusters", "hub",
                   "watch", "teams"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wingsmith", description=(
        "Wingsmith: Hugging Face model → multi-cluster NVIDIA Dynamo endpoint, with a person in the loop."))
    parser.add_argument("--version", action="version", version=describe(),
                        help="the release and the build (the image's build id, or the checkout's commit)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"wingsmith.cli.{name}").register(sub)
    return parser


# What a shell reports for a command ended by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> None:
    try:
        code = _run(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`wingsmith ... | head`): stop quietly, as a tool killed by SIGPIPE does.
        # What is still buffered goes nowhere, so the flush at exit cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_BROKEN_PIPE
    sys.stdout.flush()
    sys.stderr.flush()
    # A process that used a Temporal client can abort at interpreter exit (an open SDK issue);
    # leaving through os._exit keeps the exit code true.
    os._exit(code)


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help and usage errors: their output is flushed like any other
        return done.code if isinstance(done.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    main()

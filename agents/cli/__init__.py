"""The `agents` command line (`python -m agents ...`). Each subcommand lives in its own module here.

A subcommand module defines `add_parser(subparsers)` that registers its parser and sets
`func=callable(args) -> int` on it.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# Modules under agents.cli that provide subcommands; imported lazily so `--help` stays fast.
SUBCOMMANDS: tuple[str, ...] = ("rollouts", "train")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agents", description="searchgym reference learners: policies, rollouts, training")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"agents.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

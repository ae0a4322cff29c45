"""The `agents` command line (`python -m agents ...`). Each subcommand lives in its own module here.

A subcommand module defines `add_parser(subparsers)` that registers its parser and sets
`func=callable(args) -> int` on it.
"""

from __future__ import annotations

import argparse
import sys

from searchgym.cli import build_dispatcher, run_dispatcher

# Modules under agents.cli that provide subcommands; imported lazily so `--help` stays fast.
SUBCOMMANDS: tuple[str, ...] = ("export", "rollouts", "train")


def build_parser() -> argparse.ArgumentParser:
    return build_dispatcher("agents", "searchgym reference learners: policies, rollouts, training", "agents.cli", SUBCOMMANDS)


def main(argv: list[str] | None = None) -> int:
    """Run a command; a `SearchGymError` is its message and status 1, no traceback unless `--debug`."""
    from searchgym.cli.run import run_main

    return run_main(lambda args: run_dispatcher(build_parser(), args), argv)


if __name__ == "__main__":
    sys.exit(main())

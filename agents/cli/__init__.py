"""The `agents` command line (`python -m agents ...`). Each subcommand lives in its own module here.

A subcommand module defines `add_parser(subparsers)` that registers its parser and sets
`func=callable(args) -> int` on it.
"""

from __future__ import annotations

import argparse
import sys

from agents.cli.dataclass_args import nested_flags_for
from searchgym.cli import build_dispatcher, run_dispatcher

# Modules under agents.cli that provide subcommands; imported lazily so `--help` stays fast.
SUBCOMMANDS: tuple[str, ...] = ("export", "rollouts", "train")


class NestedFlagParser(argparse.ArgumentParser):
    """An unrecognized flag is an error that names the nested flag it most likely meant: the flags follow
    the configs' nesting (`--optim.lr`), and the flat flags of the earlier layout (`--lr`) are gone."""

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            hints = [f"{flag} is {' or '.join(found)}" for flag in extras if (found := nested_flags_for(flag, vars(parsed)))]
            message = f"unrecognized arguments: {' '.join(extras)}"
            self.error(message + ("; options follow the config's nesting: " + "; ".join(hints) if hints else ""))
        return parsed


def build_parser() -> argparse.ArgumentParser:
    return build_dispatcher("agents", "searchgym reference learners: policies, rollouts, training", "agents.cli", SUBCOMMANDS,
                            parser_class=NestedFlagParser)


def main(argv: list[str] | None = None) -> int:
    """Run a command; a `SearchGymError` is its message and status 1, no traceback unless `--debug`."""
    from searchgym.cli.run import run_main

    return run_main(lambda args: run_dispatcher(build_parser(), args), argv)


if __name__ == "__main__":
    sys.exit(main())

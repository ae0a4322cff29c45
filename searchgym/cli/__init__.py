"""The `searchgym` command line. Each subcommand lives in its own module under `searchgym.cli`.

A subcommand module defines `add_parser(subparsers)` that registers its parser and sets
`func=callable(args) -> int` on it. A `SearchGymError` out of a command is printed as `error: <message>`
with exit status 1, no traceback unless `--debug` is given (`searchgym.cli.run`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# Modules under searchgym.cli that provide subcommands; imported lazily so `--help` stays fast.
SUBCOMMANDS: tuple[str, ...] = ("index", "serve", "judge")


def build_dispatcher(prog: str, description: str, package: str, subcommands: tuple[str, ...], *,
                     parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A parser whose subcommands come from `package.<name>` modules, each with `add_parser(subparsers)`.
    Shared by the `searchgym` and `agents` command lines; `parser_class` builds it and its subparsers."""
    parser = parser_class(prog=prog, description=description)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    # Taken out of the arguments before parsing (`searchgym.cli.run`): listed here for --help.
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error, not only its message "
                        "(anywhere on the command line; or set SEARCHGYM_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in subcommands:
        importlib.import_module(f"{package}.{name}").add_parser(sub)
    return parser


def run_dispatcher(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


def build_parser() -> argparse.ArgumentParser:
    return build_dispatcher("searchgym", "searchgym: search environments for LLM agents", "searchgym.cli", SUBCOMMANDS)


def main(argv: list[str] | None = None) -> int:
    from searchgym.cli.run import run_main

    return run_main(lambda args: run_dispatcher(build_parser(), args), argv)


if __name__ == "__main__":
    sys.exit(main())

"""The `searchgym` command line. Each subcommand lives in its own module under `searchgym.cli`.

A subcommand module defines `add_parser(subparsers)` that registers its parser and sets
`func=callable(args) -> int` on it.
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
    return run_dispatcher(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())

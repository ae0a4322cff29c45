"""Running a command line's `main`: a refusal is a message, not a traceback.

A `SearchGymError` out of a command (a missing file, a bad setting, a damaged checkpoint) is something the
user can fix, and its message says how; a traceback around it only buries that. `run_main` prints
`error: <message>` to stderr and returns exit status 1. `--debug` among the arguments (before a `--` that
passes the rest on) shows the traceback as well, as does the environment variable `SEARCHGYM_DEBUG=1`,
which nothing but this function reads. Any other exception is a bug and keeps its traceback.

The `searchgym` and `agents` command lines run through it (`searchgym.cli.main`, `agents.cli.main`), and so
do the modules run as `python -m benchmarks.NAME`, `python -m agents.experiments.NAME` and `python -m tools.NAME`.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from searchgym.errors import SearchGymError

DEBUG_FLAG = "--debug"
DEBUG_ENV = "SEARCHGYM_DEBUG"


def take_debug_flag(args: list[str]) -> bool:
    """Remove `--debug` from `args` (up to a `--`) in place; whether it was there."""
    end = args.index("--") if "--" in args else len(args)
    found = DEBUG_FLAG in args[:end]
    args[:end] = [a for a in args[:end] if a != DEBUG_FLAG]
    return found


def run_main(main: Callable[..., int | None], argv: Sequence[str] | None = None) -> int:
    """Run `main` and return its exit status (None is 0); a `SearchGymError` is printed as one line on
    stderr and is status 1 (see the module docstring). `main` takes the arguments as a list, or nothing
    (it then reads `sys.argv`, with `--debug` taken out)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = take_debug_flag(args) or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        if inspect.signature(main).parameters:
            status = main(args)
        else:
            sys.argv[1:] = args
            status = main()
    except SearchGymError as e:
        if debug:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return 1
    return int(status or 0)

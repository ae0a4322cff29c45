"""The commands that moved out of `benchmarks/` keep their old names for one version: `python -m
benchmarks.NAME` says where NAME went, on stderr, and runs it there with the same arguments."""

from __future__ import annotations

import runpy
import sys


def run_moved(old: str, new: str) -> None:
    """Run `python -m new` for a `python -m old` command: one deprecation line on stderr, then `new` as the
    main module (its `main` on this process's arguments, exactly as `python -m new` calls it)."""
    print(f"python -m {old} is deprecated and goes in the next version: run python -m {new}", file=sys.stderr, flush=True)
    runpy.run_module(new, run_name="__main__", alter_sys=True)

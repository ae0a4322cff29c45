"""What one fuzzed input ends in (`Outcome`), and the time limit past which it counts as a hang."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

TIME_LIMIT_S = 10.0
"""Longest time one input may take before it counts as a hang."""



class Outcome(NamedTuple):
    kind: str
    """`observation:search`, `dataset`, `DataError`, `http 413`, ... or `crash` for a crash."""
    crash: str | None = None
    """What went wrong, for a crash."""


class InputHang(BaseException):
    """Raised in the main thread when one input runs past its time limit. A BaseException, so that library
    code that catches `Exception` cannot swallow it."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block with `InputHang` after `seconds` (main thread only; elsewhere a no-op).

    An outer timer (pytest-timeout's) is suspended and re-armed with what was left of it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _fire(signum, frame):
        raise InputHang(f"no outcome within {seconds:g} s")

    started = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, _fire)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay:
            left = max(old_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


def crash(what: str) -> Outcome:
    return Outcome("crash", what)


def describe_exception(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:300]}"

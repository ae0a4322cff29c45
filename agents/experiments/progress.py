"""Progress on stderr for the long phases of the experiments and the benchmarks, in one place.

`phase` is a tqdm bar that keeps moving while a single long call runs: a background thread redraws it
every `every` seconds, so the elapsed time and the ETA stay current even when nothing ticks for a minute
(one greedy evaluation is one call into the rollout engine). On a terminal the bar redraws in place; when
stderr is a file or a pipe (CI logs, `| tee`), the same text is written as one line per beat, since a log
keeps only the last of the carriage-return redraws on its line.

What ticks the bar is up to the caller: `counting_calls` counts calls of an object's method (RL steps),
`counting_passes` counts forward passes of a torch module (with an in-process policy, one per generated
token, so a bar of generated tokens against their budget moves many times a second).

Results are printed only after a phase's bar is closed, so a table never lands between bar updates.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tqdm import tqdm


LINES: bool | None = None
"""The default of `phase(lines=...)` for this process: None writes lines when stderr is not a terminal.
Processes that share one terminal (learners trained side by side) set True."""


class _Discard:
    """A file that drops what tqdm draws: in line mode the beat thread writes the lines itself."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@contextmanager
def phase(what: str, total: int | None = None, unit: str = "it", *, every: float = 10.0, file: TextIO | None = None,
          lines: bool | None = None) -> Iterator[tqdm]:
    """A progress bar for `what` that shows its elapsed time and ETA at least every `every` seconds.

    `total` None: a line of elapsed time (a single call with nothing to count). `total` may be an upper bound: a phase that ends early (every episode answered before its last turn)
    is shown complete when it closes. `lines`: write one line per beat instead of redrawing in place
    (default: when `file`, stderr by default, is not a terminal).
    """
    if every <= 0:
        raise ValueError(f"every must be > 0 seconds, got {every}")
    out = file if file is not None else sys.stderr
    if lines is None:
        lines = LINES if LINES is not None else not (hasattr(out, "isatty") and out.isatty())
    # smoothing=0: rate and ETA from the average over the whole phase; its steps are few and uneven.
    # Without a total there is no ETA to give, and a count of 0 says nothing: the elapsed time only.
    elapsed_only = "{desc}: {elapsed} elapsed" if total is None else None
    bar = tqdm(total=total, desc=what, unit=unit, file=_Discard() if lines else out, mininterval=1.0, smoothing=0,
               dynamic_ncols=not lines, bar_format=elapsed_only)
    lock = threading.Lock()

    def beat() -> None:
        with lock:
            if lines:
                out.write(str(bar) + "\n")
                out.flush()
            else:
                bar.refresh()

    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            beat()

    thread = threading.Thread(target=run, name=f"progress: {what}", daemon=True)
    thread.start()
    try:
        yield bar
    finally:
        stop.set()
        thread.join()
        if bar.total is not None and bar.n < bar.total:
            bar.total = bar.n  # an upper bound that was not needed: the phase is done
        if lines:
            beat()
        bar.close()


@contextmanager
def counting_calls(obj: Any, name: str, bar: tqdm, *, postfix: Any = None) -> Iterator[None]:
    """Tick `bar` once after every call of `obj.<name>` while the block runs (an instance attribute shadows
    the method meanwhile). `postfix(result)`: a dict shown next to the bar after each call."""
    had_own = name in getattr(obj, "__dict__", {})
    original = getattr(obj, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if postfix is not None:
            bar.set_postfix(postfix(result), refresh=False)
        bar.update(1)
        return result

    setattr(obj, name, counted)
    try:
        yield
    finally:
        if had_own:
            setattr(obj, name, original)
        else:
            delattr(obj, name)


@contextmanager
def counting_passes(module: Any, bar: tqdm) -> Iterator[None]:
    """Tick `bar` once per forward pass of the torch `module` while the block runs (nothing when `module`
    is None, e.g. a policy served by SGLang: the bar then shows the elapsed time only).

    A transformers model is counted at its decoder (`get_decoder()`): generation calls the whole model, but
    the training code computes log-probabilities through the decoder alone, and both go through it."""
    if module is None:
        yield
        return
    get_decoder = getattr(module, "get_decoder", None)
    target = get_decoder() if callable(get_decoder) else module

    def tick(*_: Any) -> None:
        bar.update(1)  # a forward hook that returns a value replaces the module's output: return None

    handle = target.register_forward_hook(tick)
    try:
        yield
    finally:
        handle.remove()


def generation_budget(questions: int, max_turns: int, max_turn_tokens: int, batch_rows: int | None) -> int:
    """An upper bound on the forward passes of an in-process greedy evaluation: per turn, each chunk of
    `batch_rows` questions takes at most one pass per token of the turn's budget (prefill included)."""
    chunks = math.ceil(questions / batch_rows) if batch_rows else 1
    return max(1, max_turns * chunks * max_turn_tokens)


def evaluation_budget(questions: int, max_turns: int, max_turn_tokens: int, batch_rows: int | None, samples: int = 0) -> int:
    """`generation_budget` of a greedy evaluation, plus, with `samples` = k >= 2, its k sampled rollouts per
    question (k rows per question, so `batch_rows // k` questions per chunk)."""
    total = generation_budget(questions, max_turns, max_turn_tokens, batch_rows)
    if samples >= 2:
        total += generation_budget(questions, max_turns, max_turn_tokens, max(1, batch_rows // samples) if batch_rows else None)
    return total

"""Running the surfaces: `examples` generated inputs through each, the outcomes counted, and the report
(`python -m tools.fuzz`)."""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tools.fuzz.env import EnvHarness, env_cases
from tools.fuzz.files import corpus_file_cases, corpus_harness, qa_file_cases, qa_harness
from tools.fuzz.server import ServerHarness, server_cases



@dataclass(frozen=True)
class Surface:
    name: str
    strategy: Callable[[], st.SearchStrategy]
    harness: Callable[[], Any]


def _verdict_cases() -> st.SearchStrategy:
    from tools.fuzz_verdicts import verdict_cases  # that module imports this package

    return verdict_cases()


def _verdict_harness() -> Any:
    from tools.fuzz_verdicts import VerdictHarness

    return VerdictHarness()


def _answer_cases() -> st.SearchStrategy:
    from tools.fuzz_answers import answer_cases  # that module imports this package

    return answer_cases()


def _answer_harness() -> Any:
    from tools.fuzz_answers import AnswerHarness

    return AnswerHarness()


SURFACES: dict[str, Surface] = {
    "env": Surface("env", env_cases, EnvHarness),
    "qa_files": Surface("qa_files", qa_file_cases, qa_harness),
    "corpus_files": Surface("corpus_files", corpus_file_cases, corpus_harness),
    "server": Surface("server", server_cases, ServerHarness),
    "verdicts": Surface("verdicts", _verdict_cases, _verdict_harness),
    "answers": Surface("answers", _answer_cases, _answer_harness),
}

FUZZ_SETTINGS = {"deadline": None, "database": None, "suppress_health_check": list(HealthCheck)}
"""Hypothesis settings shared with the tests: no per-example deadline (hangs are caught by `time_limit`,
and a loaded machine must not fail a run), no example database (nothing written to the checkout)."""


@dataclass
class Tally:
    surface: str
    inputs: int = 0
    outcomes: Counter = field(default_factory=Counter)
    crashes: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0
    slowest_s: float = 0.0


def run_surface(surface: Surface, examples: int, *, random_seed: int = 0) -> Tally:
    """Run `examples` generated inputs through one surface (no shrinking) and count the outcomes."""
    tally = Tally(surface.name)
    harness = surface.harness()

    @seed(random_seed)
    @settings(max_examples=examples, phases=[Phase.generate], **FUZZ_SETTINGS)
    @given(case=surface.strategy())
    def one(case):
        started = time.perf_counter()
        outcome = harness.run(case)
        tally.slowest_s = max(tally.slowest_s, time.perf_counter() - started)
        tally.inputs += 1
        tally.outcomes[outcome.kind] += 1
        if outcome.crash is not None:
            tally.crashes.append((repr(case)[:400], outcome.crash))

    started = time.perf_counter()
    try:
        one()
    finally:
        tally.wall_s = time.perf_counter() - started
        harness.close()
    return tally


def crash_kind(crash: str) -> str:
    """A crash's kind, for counting: the exception class, the HTTP status, or the broken contract."""
    if crash.startswith("contract: "):
        return "contract: " + crash.removeprefix("contract: ").split(":")[0]
    if crash.startswith("HTTP "):
        return " ".join(crash.split()[:2])
    return crash.split(":")[0]


def _counts(counter: Counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def report(tallies: list[Tally]) -> str:
    lines = [f"{'surface':<13} {'inputs':>6} {'crashes':>7} {'wall_s':>7} {'slowest_s':>9}  outcomes"]
    for t in tallies:
        lines.append(f"{t.surface:<13} {t.inputs:>6} {len(t.crashes):>7} {t.wall_s:>7.1f} {t.slowest_s:>9.2f}  "
                     f"{_counts(t.outcomes)}")
    for t in tallies:
        examples: dict[str, tuple[str, str]] = {}
        kinds: Counter = Counter()
        for case, crash in t.crashes:
            kinds[crash_kind(crash)] += 1
            examples.setdefault(crash_kind(crash), (case, crash))
        if kinds:
            lines.append(f"{t.surface} crash kinds: {_counts(kinds)}")
        for case, crash in examples.values():
            lines.append(f"  CRASH {t.surface}: {crash[:300]}\n    input: {case}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="fuzz every input surface with bad input; crashes must be 0")
    p.add_argument("--examples", type=int, default=2000, help="inputs per surface")
    p.add_argument("--surface", action="append", choices=sorted(SURFACES), help="surfaces to run (default: all)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    names = args.surface or list(SURFACES)
    # Fuzzed files make the loaders warn (a supporting title missing from the context...); the counts are
    # what this reports.
    logging.getLogger("searchgym").setLevel(logging.ERROR)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs", flush=True)
    tallies = []
    for name in names:
        tallies.append(run_surface(SURFACES[name], args.examples, random_seed=args.seed))
        print(f"  {name}: {tallies[-1].inputs} inputs in {tallies[-1].wall_s:.1f} s", flush=True)
    print(report(tallies))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if any(t.crashes for t in tallies) else 0

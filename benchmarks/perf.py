"""Every performance ratio the project promises, measured in one run.

Runs, in order, with the settings each issue names (use `--quick` for smaller sizes):

1. `benchmarks.bm25`: bm25s vs rank-bm25 queries/s and top-10 overlap; env steps vs the bare retriever.
2. `benchmarks.judge_overhead`: env step time with GoldJudge and entity matching vs without.
3. `benchmarks.retrieval`: build time, memory, queries/s and latency per retriever, in-process vs server.
4. `benchmarks.rollout_overhead`: the rollout engine vs bare `generate` for the same tokens (SmolLM2).
5. `benchmarks.step`: an RL step of the learning check's shape in float32 and in bfloat16; the decode bound
   per precision and allocator; the update's peak RSS.
6. `benchmarks.load`: the retrieval server under 64 clients vs the in-process retriever it serves.

    python -m benchmarks.perf [--quick] [--only bm25 judge retrieval rollout step load]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

SUITE = {
    "bm25": ("benchmarks.bm25", [], ["--passages", "20000", "--queries", "500", "--rank-bm25-queries", "20"]),
    "judge": ("benchmarks.judge_overhead", [], ["--passages", "20000", "--questions", "100", "--repeats", "3"]),
    "retrieval": ("benchmarks.retrieval", [], ["--synthetic-passages", "20000", "--skip", "recall"]),
    "rollout": ("benchmarks.rollout_overhead", [], ["--batch", "4", "--repeats", "1"]),
    "step": ("benchmarks.step", [], ["--steps", "1"]),
    "load": ("benchmarks.load", [], ["--duration", "3", "--entities", "500"]),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller corpora and fewer repeats (minutes instead of tens of minutes)")
    p.add_argument("--only", nargs="+", choices=list(SUITE), default=list(SUITE))
    args = p.parse_args(argv)
    for name in args.only:
        module, full, quick = SUITE[name]
        print(f"\n===== {name}: python -m {module} {' '.join(quick if args.quick else full)}", flush=True)
        start = time.perf_counter()
        # Each benchmark runs in its own process: numba compilation, model loads and caches are charged to
        # each alike, and one benchmark's memory never skews the next one's figures.
        subprocess.run([sys.executable, "-m", module, *(quick if args.quick else full)], check=True)
        print(f"===== {name} done in {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))

"""Env step time with GoldJudge and entity matching on, against the same env with both off.

Two `SearchQAEnv`s over one synthetic world (BM25 over `--passages` passages, 50 candidates, 3 shown)
replay the same oracle trajectories (searches, then an answer); only the time spent in `step` is counted.
The two envs take turns episode by episode, the replay is repeated `--repeats` times, and each episode
counts with its fastest repeat (other processes only ever add time), so machine noise hits both alike.
Printed twice: with cold caches (every shown document is new: `searchgym.entities.clear_caches` forgets
normalizations, prepared gold phrases and remembered document matches) and warm ones (every shown
document was seen before). Target: ratio <= 1.2. Also printed: the ratio for whole episodes, `reset`
included, where the question's gold names are prepared.

    python -m benchmarks.judge_overhead [--passages 100000] [--questions 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

from agents.experiments.progress import phase
from searchgym.data.synthetic import QuestionConfig, SyntheticWorld, WorldConfig
from searchgym.entities import clear_caches
from searchgym.envs import SearchQAEnv


def _episode(env: SearchQAEnv, index: int, turns: list[str]) -> tuple[float, float]:
    """Seconds spent in `reset` and in `step` replaying one episode."""
    start = time.perf_counter()
    env.reset(options={"index": index})
    reset = time.perf_counter() - start
    total = 0.0
    for turn in turns:
        start = time.perf_counter()
        env.step(turn)
        total += time.perf_counter() - start
    return reset, total


def _replay(envs: dict[str, SearchQAEnv], episodes: list[list[str]], *, cold: bool) -> dict[str, list[tuple[float, float]]]:
    """Seconds in `reset` and in `step` per env and episode; the envs take turns episode by episode (in
    alternating order), so a burst of machine load lands on both alike. `cold`: forget cached
    normalizations and document matches first."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in envs}
    names = list(envs)
    if cold:
        clear_caches()
    for index, turns in enumerate(episodes):
        for name in names if index % 2 == 0 else reversed(names):
            times[name].append(_episode(envs[name], index, turns))
    return times


def _summary(label: str, envs: dict[str, SearchQAEnv], runs: list[dict[str, list[tuple[float, float]]]], n_episodes: int,
             steps: int) -> list[str]:
    """The report lines of one cache state: per episode, the fastest of the repeats (preemption by other
    processes only ever adds time)."""
    best = {name: sum(min(run[name][i][1] for run in runs) for i in range(n_episodes)) for name in envs}
    resets = {name: sum(min(run[name][i][0] for run in runs) for i in range(n_episodes)) for name in envs}
    per_plain, per_credit = best["plain"] / steps * 1e3, best["credit"] / steps * 1e3
    # `reset` prepares the question's gold names (once per question, for the judge and the matcher):
    # the whole episode, reset included, shows where that went.
    whole = {name: best[name] + resets[name] for name in envs}
    added_reset = (resets["credit"] - resets["plain"]) / n_episodes * 1e6
    return [f"[{label}] step time without judge/entities {per_plain:.3f} ms, with GoldJudge + entity matching "
            f"{per_credit:.3f} ms, added {(per_credit - per_plain) * 1e3:.1f} us per step",
            f"[{label}] ratio: {best['credit'] / best['plain']:.3f}x (target <= 1.2x)",
            f"[{label}] whole episodes, reset included: {whole['credit'] / whole['plain']:.3f}x "
            f"(reset adds {added_reset:.1f} us per episode)"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="step-time overhead of GoldJudge + entity matching")
    p.add_argument("--passages", type=int, default=100_000)
    p.add_argument("--questions", type=int, default=200)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)

    # Bars on stderr between the timed parts only (never inside a timed episode); results print after them.
    with phase("[judge_overhead] world, indexes, warm-up", total=3, unit="part") as bar:
        world = SyntheticWorld.generate(WorldConfig.for_passages(args.passages, seed=0))
        records = world.questions(QuestionConfig(hops=(1, 2, 3), num_questions=args.questions, seed=0))
        episodes = [world.oracle_trajectory(r) for r in records]
        bar.update(1)
        common = {"top_k": 3, "candidates": 50, "max_turns": 5, "cache_dir": False}
        plain = SearchQAEnv(records, world.corpus, judge=None, match_entities=False, **common)
        credit = SearchQAEnv(records, world.corpus, judge="gold", match_entities=True, **common)
        envs = {"plain": plain, "credit": credit}
        bar.update(1)
        _replay(envs, episodes[:10], cold=False)  # warm up: numba compilation
        bar.update(1)
    steps = sum(len(t) for t in episodes)

    # Sanity: the credit env really labels every search round.
    credit.reset(options={"index": 0})
    for turn in episodes[0]:
        *_, info = credit.step(turn)
    assert info["episode"]["judge_failures"] == 0 and info["episode"]["entity_rate"] is not None

    report = [f"corpus: {len(world.corpus)} passages; {len(episodes)} episodes, {steps} steps; per episode the best of {args.repeats}"]
    # Cold: every document is normalized the first time a replay shows it, as when most retrieved documents
    # are new. Warm: all were seen before, as when a GRPO group's rollouts of one question retrieve the same.
    with phase("[judge_overhead] replays, cold then warm caches", total=2 * args.repeats, unit="replay") as bar:
        for label, cold in (("cold caches", True), ("warm caches", False)):
            runs = []
            for _ in range(args.repeats):
                runs.append(_replay(envs, episodes, cold=cold))
                bar.update(1)
            report += _summary(label, envs, runs, len(episodes), steps)
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))

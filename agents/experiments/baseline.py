"""Scripted baseline agents evaluated on `SearchQA-Synthetic-v0` (seconds; the main job is
`agents.experiments.learners`).

Three agents bracket what a learned policy should reach:

- `no-search`: answers at once with a capitalized phrase taken from the question (a model answering from
  memory; on a fictional world it should score ~0).
- `search-read`: searches the question once and answers with the most frequent name in the shown
  documents that is not in the question (a lexical reader: one retrieval, no reasoning).
- `oracle`: replays the world's oracle trajectory (the right query at every hop): the ceiling that
  retrieval allows with `top_k` documents per search.

Prints EM, F1, searches and turns per episode, invalid-action rate and outcome counts per agent, and EM
per hop count.

    python -m agents.experiments.baseline --episodes 300
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable

import gymnasium as gym

import searchgym  # noqa: F401  (registers the ids)
from agents.experiments.progress import phase
from searchgym.data.records import QARecord

_NAME = re.compile(r"(?:[A-Z][\w'’-]+)(?: (?:of |de |the )?[A-Z][\w'’-]+)*")

Agent = Callable[[QARecord, str, int], str]
"""(record, last observation, turn) -> the agent's text for this turn."""


def no_search(record: QARecord, observation: str, turn: int) -> str:
    names = [n for n in _NAME.findall(record.question) if n.split()[0] not in ("Who", "What", "Where", "Which", "In", "When")]
    return f"<think>I will answer from memory.</think><answer>{names[-1] if names else 'unknown'}</answer>"


def search_read(record: QARecord, observation: str, turn: int) -> str:
    if turn == 0:
        return f"<think>Let me search the question.</think><search>{record.question}</search>"
    in_question = record.question.lower()
    counts = Counter(n for n in _NAME.findall(observation) if n.lower() not in in_question and not n.startswith(("Doc", "Title")))
    guess = counts.most_common(1)[0][0] if counts else "unknown"
    return f"<think>The documents mention {guess} most often.</think><answer>{guess}</answer>"


def make_oracle(world) -> Agent:
    cache: dict[str, list[str]] = {}

    def oracle(record: QARecord, observation: str, turn: int) -> str:
        turns = cache.setdefault(record.id, world.oracle_trajectory(record))
        return turns[min(turn, len(turns) - 1)]

    return oracle


def evaluate(env: gym.Env, agent: Agent, episodes: int, desc: str) -> dict:
    stats: dict = defaultdict(float)
    per_hop: dict[int, list[float]] = defaultdict(list)
    outcomes: Counter = Counter()
    with phase(desc, total=episodes, unit="episode") as bar:
        for i in range(episodes):
            _episode(env, agent, i, stats, per_hop, outcomes)
            bar.update(1)
    out = {k: v / episodes for k, v in stats.items()}
    out["invalid_rate"] = stats["invalid"] / max(stats["turns"], 1)
    out["outcomes"] = dict(outcomes)
    out["em_by_hops"] = {h: sum(v) / len(v) for h, v in sorted(per_hop.items())}
    return out


def _episode(env: gym.Env, agent: Agent, i: int, stats: dict, per_hop: dict[int, list[float]], outcomes: Counter) -> None:
    """Play question `i % len(records)` with `agent`, adding its episode summary to the tallies."""
    base = env.unwrapped
    obs, info = env.reset(options={"index": i % len(base.records)})
    record, turn, done = base.record, 0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(agent(record, obs, turn))
        turn += 1
        done = terminated or truncated
    ep = info["episode"]
    stats["em"] += ep["em"]
    stats["f1"] += ep["f1"]
    stats["searches"] += ep["searches"]
    stats["turns"] += ep["turns"]
    stats["invalid"] += ep["invalid_actions"]
    outcomes[ep["outcome"]] += 1
    per_hop[record.hops or 0].append(ep["em"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=300, help="questions per agent")
    p.add_argument("--num-entities", type=int, default=2000)
    p.add_argument("--hops", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--split", default="test", choices=["train", "test"])
    p.add_argument("--max-turns", type=int, default=5)
    args = p.parse_args(argv)

    t0 = time.perf_counter()
    env = gym.make("SearchQA-Synthetic-v0", num_entities=args.num_entities, hops=tuple(args.hops), split=args.split,
                   num_questions=args.episodes, max_turns=args.max_turns)
    base = env.unwrapped
    print(f"SearchQA-Synthetic-v0: {len(base.corpus):,} passages, {len(base.records)} {args.split} questions "
          f"(hops {args.hops}), top_k={base.top_k}, max_turns={base.max_turns}; built in {time.perf_counter() - t0:.1f} s")
    agents = {"no-search": no_search, "search-read": search_read, "oracle": make_oracle(base.world)}
    episodes = min(args.episodes, len(base.records))
    # Every agent first, each behind its own bar on stderr; the table after the last bar has closed.
    results = {name: evaluate(env, agent, episodes, f"[{name}] episodes") for name, agent in agents.items()}
    hops_cols = " | ".join(f"EM@{h}hop" for h in sorted(set(args.hops)))
    print(f"\n| agent | EM | F1 | searches/ep | turns/ep | invalid rate | {hops_cols} | outcomes |")
    print("|---|---|---|---|---|---|" + "---|" * len(set(args.hops)) + "---|")
    for name, r in results.items():
        by_hop = " | ".join(f"{r['em_by_hops'].get(h, 0.0):.3f}" for h in sorted(set(args.hops)))
        print(f"| {name} | {r['em']:.3f} | {r['f1']:.3f} | {r['searches']:.2f} | {r['turns']:.2f} | {r['invalid_rate']:.3f} | {by_hop} | {r['outcomes']} |")
    print(f"\n{episodes} episodes per agent; total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))

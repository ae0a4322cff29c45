"""Env steps/s of many episodes at once: `SearchQAVectorEnv` (one retrieval call per step) against a plain loop.

`--envs` (64) episodes are in flight at all times: a scripted agent (it searches the question's text, then
by the env's position answers with the gold answer, acts invalidly, searches a gold entity, or guesses)
plays each env's episode, and an env whose episode ended is reset at its next step (Gymnasium's NEXT_STEP autoreset),
so both sides make exactly the same resets and steps. Each of `--steps` steps of the run is timed on its own,
the agent's choice of actions outside the timer. With `--group-size G` the envs come in groups of G on one
question (a GRPO group: the same seed, so the same questions after every reset too), whose identical
searches the vector env sends once:

- `plain loop`: 64 envs from `gym.make`, each with its own retriever, stepped one after another
  (`env.step(action)`, or `env.reset()` for an ended one): what a trainer without a vector env does;
- `vector (list)`: `SearchQAVectorEnv`, infos as a list of per-env dicts (what an LLM trainer reads);
- `vector (dict)`: the same, infos merged into Gymnasium's dict of arrays (`gym.make_vec`'s default).

It prints env steps/s (resets and steps, counted alike) per side, the median of each round's ratio
vector / plain (rounds alternate sides, so a shared machine's drift hits them alike), and how many
retriever calls each side made. The retriever is the in-process BM25 (bm25s) over the synthetic world's
passages, or with `--server` a Search-R1 retrieval server started here on loopback (`searchgym serve`, its
own process), which every env reaches over HTTP: one request per search for the plain loop, one per step
for the vector env.

    python -m benchmarks.vector_env [--envs 64] [--steps 24] [--repeats 5] [--num-entities 2000] [--group-size 1]
                                    [--server] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym

import searchgym  # noqa: F401 - registers the ids
from agents.experiments.progress import phase
from searchgym.vector import SearchQAVectorEnv

ENV_ID = "SearchQA-Synthetic-v0"

CLOCK = time.thread_time
"""What the sides are timed with: this thread's CPU seconds (the default, `--clock cpu`: other processes on a
shared machine do not count) or wall seconds (`--clock wall`, and always with `--server`, whose work is in
another process)."""


class CountingRetriever:
    """Counts the retriever calls a side makes (the point of the batched step)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def search(self, queries, k):
        self.calls += 1
        return self.inner.search(queries, k)

    def describe(self):
        return self.inner.describe()


def scripted_action(record, turn: int, position: int) -> str:
    entity = record.gold_entities[0] if record.gold_entities else record.question
    if turn == 0:
        return f"<think>I need to look up {entity}.</think><search>{record.question}</search>"
    kind = position % 4
    if kind == 0:
        return f"<think>{entity} leads to the answer.</think><answer>{record.answers[0]}</answer>"
    if kind == 1:
        return "I am not sure what to do next."
    if kind == 2 and turn < 3:
        return f"<think>Now more about {entity}.</think><search>{entity}</search>"
    return "<think>I will guess.</think><answer>Paris</answer>"


def _actions(envs, turns) -> list[str]:
    """The scripted agent's action for each env ('' for an env that resets at this step)."""
    out = []
    for i, env in enumerate(envs):
        if env.done:
            out.append("")
            turns[i] = 0
        else:
            out.append(scripted_action(env.record, turns[i], i))
            turns[i] += 1
    return out


def _seeds(n: int, seed: int, group: int) -> list[int]:
    """Env i's reset seed: envs of one group share it, so they play the same questions (a GRPO group)."""
    return [seed + i // group for i in range(n)]


def run_plain(envs, steps: int, seed: int, group: int = 1) -> float:
    """Seconds the plain loop spends in `reset`/`step` over `steps` steps of every env."""
    bases = [e.unwrapped for e in envs]
    for e, s in zip(envs, _seeds(len(envs), seed, group)):
        e.reset(seed=s)
    turns, spent = [0] * len(envs), 0.0
    for _ in range(steps):
        actions = _actions(bases, turns)
        start = CLOCK()
        for env, base, action in zip(envs, bases, actions):
            if base.done:
                env.reset()
            else:
                env.step(action)
        spent += CLOCK() - start
    return spent


def run_vector(venv: SearchQAVectorEnv, steps: int, seed: int, group: int = 1) -> float:
    venv.reset(seed=_seeds(venv.num_envs, seed, group))
    turns, spent = [0] * venv.num_envs, 0.0
    for _ in range(steps):
        actions = _actions(venv.envs, turns)
        start = CLOCK()
        venv.step(actions)
        spent += CLOCK() - start
    return spent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(corpus, folder: Path) -> tuple[subprocess.Popen, str]:
    """`searchgym serve` over the world's passages, on a free loopback port; returns it once it answers."""
    from searchgym.retrieval.http import HTTPRetriever

    path = folder / "corpus.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for doc in corpus:
            f.write(json.dumps({"id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "searchgym", "serve", "--corpus", str(path), "--port", str(port),
                             "--cache-dir", str(folder / "cache"), "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/retrieve"
    deadline = time.monotonic() + 120
    while True:
        try:
            HTTPRetriever(url).search(["warm up"], 1)
            return proc, url
        except Exception:  # noqa: BLE001 - not up yet; the deadline below bounds the wait
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"the retrieval server did not start: {proc.stderr.read().decode()[-2000:]}") from None
            time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=24, help="steps of every env per round (about 8 episodes each)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds; each runs every side once")
    parser.add_argument("--num-entities", type=int, default=2000)
    parser.add_argument("--group-size", type=int, default=1,
                        help="envs per question (a GRPO group): a group's first searches are the same query, sent once")
    parser.add_argument("--server", action="store_true", help="retrieve from a Search-R1 server on loopback")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu", help="this thread's CPU time or wall time")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.perf_counter if args.server or args.clock == "wall" else time.thread_time
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    kw = dict(num_entities=args.num_entities, cache_dir=False)
    with tempfile.TemporaryDirectory() as tmp, phase("[vector_env] world, indexes, envs", total=3, unit="part") as bar:
        world_env = gym.make(ENV_ID, **kw)
        proc, retriever_arg = None, "bm25"
        if args.server:
            proc, retriever_arg = start_server(world_env.unwrapped.corpus, Path(tmp))
        bar.update()
        plain_counter = CountingRetriever(gym.make(ENV_ID, retriever=retriever_arg, **kw).unwrapped.retriever)
        # Each plain env keeps a retriever of its own, as gym.make builds it; the counter only counts.
        plain = []
        for _ in range(args.envs):
            env = gym.make(ENV_ID, retriever=retriever_arg, **kw)
            env.unwrapped.retriever = CountingRetriever(env.unwrapped.retriever)
            plain.append(env)
        bar.update()
        vector_counter = CountingRetriever(plain_counter.inner)
        sides = {
            "plain loop": lambda seed: run_plain(plain, args.steps, seed, args.group_size),
            "vector (list)": _vector_side(args, kw, vector_counter, "list"),
            "vector (dict)": _vector_side(args, kw, vector_counter, "dict"),
        }
        bar.update()
        try:
            times = _rounds(sides, args)
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()
    per_round = args.envs * args.steps
    plain_calls = sum(e.unwrapped.retriever.calls for e in plain)
    retriever = "Search-R1 server on loopback (HTTP)" if args.server else "in-process BM25 (bm25s)"
    clock = "wall time" if CLOCK is time.perf_counter else "CPU time of this thread"
    groups = f" in groups of {args.group_size} on one question" if args.group_size > 1 else ""
    print(f"{args.envs} episodes in flight{groups}, {args.steps} steps each per round, {args.repeats} rounds; "
          f"synthetic world of {args.num_entities} entities; retriever: {retriever}; timed by {clock}")
    print("| side | env steps/s (median) | vector / plain (median of rounds) |")
    print("| --- | --- | --- |")
    for name, spent in times.items():
        ratios = [p / s for p, s in zip(times["plain loop"], spent)]
        print(f"| {name} | {per_round / statistics.median(spent):,.0f} | {statistics.median(ratios):.2f}x |")
    rounds_run = args.repeats + 1  # the warm-up round counts calls too
    print(f"retriever calls per round: plain loop {plain_calls // rounds_run}, vector {vector_counter.calls // (2 * rounds_run)}")
    return 0


def _vector_side(args, kw, counter, info_format):
    venv = SearchQAVectorEnv([gym.make(ENV_ID, retriever=counter, **kw) for _ in range(args.envs)], info_format=info_format)
    return lambda seed: run_vector(venv, args.steps, seed, args.group_size)


def _rounds(sides, args) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in sides}
    with phase("[vector_env] rounds (the first warms up)", total=(args.repeats + 1) * len(sides), unit="run") as bar:
        for r in range(args.repeats + 1):
            for name, run in sides.items():
                spent = run(1000 * r)
                if r:  # round 0 compiles bm25s's kernels and fills caches for every side
                    times[name].append(spent)
                bar.update()
    return times


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))

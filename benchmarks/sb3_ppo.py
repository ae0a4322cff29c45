"""stable-baselines3 PPO on the wrapped `SearchQA-Synthetic-v0`, against a random policy and the oracle.

The text env is wrapped with `searchgym.wrappers.wrap_for_sb3` (a `Discrete` choice among candidate
searches and answers, a hashed-feature `Box` observation with per-slot candidate features) and trained
with SB3's `PPO("MlpPolicy")` on the train split of a 1-hop and of a 2-hop world. Success is exact match
of the final answer on the test split (questions that start from entities never seen in training), with
the greedy (deterministic) policy. Two references use the same discrete action space:

- `random`: uniform over the slots that hold a candidate (a masked random policy; uniform over every
  slot, empty ones included, is also reported as `random (all slots)`);
- `rule`: a hand-written policy over the same slot features: search the question's first phrase, then
  (for each further hop, which it is told) the unsearched document phrase with the highest `cue_last`,
  then answer with the answer phrase with the highest `cue_last` that is not in the question. It shows
  what the per-slot features alone can reach;
- `oracle`: at every turn, the slot that matches the world's oracle trajectory
  (`DiscreteCandidateActions.slot_for(world.oracle_trajectory(record)[turn])`): the ceiling of the action
  space.

Every number is a mean and standard deviation over `--seeds` (PPO's seed; for random, the sampler's
seed). The table's last rows are PPO's margin over `random` and its share of the `oracle`'s EM, per seed.
Writes `results.json`, `results.md` (the table) and `learning_curve.png` under `--out`.

    python -m benchmarks.sb3_ppo [--hops 1 2] [--timesteps 20000 40000] [--seeds 0 1 2] [--out results/sb3_ppo]

Needs `pip install "searchgym[sb3]" matplotlib`. Default settings: about 4.5 CPU-minutes (9 min 17 s of wall
clock on 2 cores shared with other jobs).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import gymnasium as gym
import numpy as np

import searchgym  # noqa: F401  (registers the ids)
from searchgym.errors import ConfigError
from searchgym.wrappers import DiscreteCandidateActions, wrap_for_sb3


@dataclass
class Args:
    """Benchmark settings (each is also a command-line option)."""

    hops: tuple[int, ...] = (1, 2)
    """Hop counts to train on, one world each."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """PPO seeds (and random-policy seeds)."""
    timesteps: tuple[int, ...] = (20_000, 40_000)
    """PPO environment steps per run, one per entry of `hops` (or one for all)."""
    num_entities: int = 1000
    """Entities in the synthetic world (3 passages each)."""
    train_questions: int = 400
    test_questions: int = 200
    eval_every: int = 5_000
    """Timesteps between learning-curve evaluations."""
    curve_episodes: int = 100
    """Test questions per learning-curve point (the final evaluation uses all `test_questions`)."""
    n_envs: int = 4
    workers: int = 2
    """Training runs in parallel (one process each, one torch thread each)."""
    out: str = "results/sb3_ppo"
    ppo: dict = field(default_factory=lambda: {
        "n_steps": 256, "batch_size": 256, "n_epochs": 8, "learning_rate": 1e-3, "gamma": 1.0,
        "gae_lambda": 0.95, "ent_coef": 0.01, "policy_kwargs": {"net_arch": [128, 128]},
    })
    """PPO keyword arguments (`gamma` 1: episodes are a few steps and only the answer is rewarded)."""

    def __post_init__(self) -> None:
        if len(self.timesteps) not in (1, len(self.hops)):
            raise ConfigError(f"--timesteps takes one value or one per hop count ({len(self.hops)}), "
                              f"got {list(self.timesteps)}")
        if not self.seeds or min(self.seeds) < 0:
            raise ConfigError("--seeds needs at least one non-negative seed")
        if min(self.timesteps) < 1 or self.eval_every < 1 or self.n_envs < 1 or self.workers < 1:
            raise ConfigError("--timesteps, --eval-every, --n-envs and --workers must be >= 1")

    def steps_for(self, hops: int) -> int:
        return self.timesteps[0] if len(self.timesteps) == 1 else self.timesteps[self.hops.index(hops)]


def make_env(args: Args, hops: int, split: str) -> gym.Env:
    n = args.train_questions if split == "train" else args.test_questions
    env = gym.make("SearchQA-Synthetic-v0", num_entities=args.num_entities, hops=hops, split=split,
                   num_questions=n, seed=0, cache_dir=False)
    return wrap_for_sb3(env)


def _discrete(env: gym.Env) -> DiscreteCandidateActions:
    while not isinstance(env, DiscreteCandidateActions):
        env = env.env
    return env


def evaluate(env: gym.Env, choose, episodes: int) -> float:
    """Mean EM over the first `episodes` questions of `env`; `choose(obs, env) -> slot`."""
    total = 0.0
    for i in range(episodes):
        obs, _ = env.reset(options={"index": i})
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(choose(obs, env))
            done = terminated or truncated
        total += info["episode"]["em"]
    return total / episodes


def random_chooser(seed: int, masked: bool):
    rng = np.random.default_rng(seed)

    def choose(obs, env):
        mask = _discrete(env).action_masks() if masked else np.ones(env.action_space.n, dtype=bool)
        return int(rng.choice(np.flatnonzero(mask)))

    return choose


def oracle_choose(obs, env) -> int:
    d = _discrete(env)
    turns = env.unwrapped.world.oracle_trajectory(env.unwrapped.record)
    slot = d.slot_for(turns[min(d.tracker.turn, len(turns) - 1)])
    return 0 if slot is None else slot


def rule_choose(obs, env) -> int:
    d = _discrete(env)
    slots, s = d.slot_candidates(), d.config.search_slots

    def best(lo: int, hi: int) -> int | None:
        found = [(c.evidence.cue_last, -i, i) for i, (_, _, c) in enumerate(slots[lo:hi], lo)
                 if c is not None and not c.evidence.in_question and not c.evidence.searched]
        return max(found)[2] if found else None

    turn, hops = d.tracker.turn, env.unwrapped.record.hops or 1
    if turn == 0:
        return 1 if slots[1][0] != "noop" else 0
    if turn < hops:
        slot = best(0, s)
        return 0 if slot is None else slot
    slot = best(s, len(slots))
    return s if slot is None else slot


def train_job(job: tuple[Args, int, int]) -> dict:
    """One PPO run: (args, hops, seed) -> learning curve and final test EM."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    args, hops, seed = job
    torch.set_num_threads(1)
    steps = args.steps_for(hops)
    test_env = make_env(args, hops, "test")
    venv = make_vec_env(lambda: make_env(args, hops, "train"), n_envs=args.n_envs, seed=seed)
    model = PPO("MlpPolicy", venv, seed=seed, verbose=0, device="cpu", **args.ppo)

    def greedy(obs, env):
        return int(model.predict(obs, deterministic=True)[0])

    curve: list[tuple[int, float]] = [(0, evaluate(test_env, greedy, args.curve_episodes))]

    class Curve(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps // args.eval_every > curve[-1][0] // args.eval_every:
                curve.append((self.num_timesteps, evaluate(test_env, greedy, args.curve_episodes)))
            return True

    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=Curve())
    train_s = time.perf_counter() - start
    final = evaluate(test_env, greedy, args.test_questions)
    return {"hops": hops, "seed": seed, "timesteps": steps, "curve": curve, "test_em": final, "train_s": train_s}


def baselines(args: Args, hops: int) -> dict[str, list[float]]:
    env = make_env(args, hops, "test")
    return {
        "random": [evaluate(env, random_chooser(s, masked=True), args.test_questions) for s in args.seeds],
        "random (all slots)": [evaluate(env, random_chooser(s, masked=False), args.test_questions) for s in args.seeds],
        "rule": [evaluate(env, rule_choose, args.test_questions)],
        "oracle": [evaluate(env, oracle_choose, args.test_questions)],
    }


def _stat(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def table(args: Args, results: dict) -> str:
    steps = ", ".join(f"{args.steps_for(h)} ({h}-hop)" for h in args.hops)
    lines = [
        f"EM on {args.test_questions} test questions; mean ± std over seeds {list(args.seeds)}; PPO steps: {steps}.",
        "",
        "| policy | " + " | ".join(f"{h}-hop" for h in args.hops) + " |",
        "|---|" + "---|" * len(args.hops),
    ]
    names = ["random (all slots)", "random", "rule", "PPO", "oracle"]
    for name in names:
        cells = [_stat(results[str(h)][name]) for h in args.hops]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    # The margin per seed (PPO seed s against the random sampler seeded s), then its mean and spread.
    margins = [list(np.subtract(results[str(h)]["PPO"], results[str(h)]["random"])) for h in args.hops]
    lines.append("| PPO − random | " + " | ".join("+" + _stat(m) if np.mean(m) >= 0 else _stat(m) for m in margins)
                 + " |")
    # PPO's share of the action space's ceiling, per seed: its EM over the oracle's on the same questions.
    ceilings = [float(np.mean(results[str(h)]["oracle"])) for h in args.hops]
    lines.append("| PPO / oracle | " + " | ".join(_stat(list(np.divide(results[str(h)]["PPO"], c))) if c > 0 else "-"
                                                for h, c in zip(args.hops, ceilings)) + " |")
    return "\n".join(lines)


def plot(args: Args, runs: list[dict], results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.hops), figsize=(5 * len(args.hops), 3.6), squeeze=False)
    for ax, hops in zip(axes[0], args.hops):
        curves = [r["curve"] for r in runs if r["hops"] == hops]
        steps = [s for s, _ in curves[0]]
        n = min(len(c) for c in curves)
        ems = np.array([[em for _, em in c[:n]] for c in curves])
        mean, std = ems.mean(0), ems.std(0)
        ax.plot(steps[:n], mean, label="PPO (greedy)", color="C0")
        ax.fill_between(steps[:n], mean - std, mean + std, color="C0", alpha=0.25)
        for name, color in (("random", "C3"), ("rule", "C1"), ("oracle", "C2")):
            ax.axhline(np.mean(results[str(hops)][name]), color=color, linestyle="--", label=name)
        ax.set_title(f"{hops}-hop SearchQA-Synthetic-v0")
        ax.set_xlabel("environment steps")
        ax.set_ylabel(f"test EM ({args.curve_episodes} questions)")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> Args:
    d = Args()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hops", type=int, nargs="+", default=list(d.hops))
    p.add_argument("--seeds", type=int, nargs="+", default=list(d.seeds))
    p.add_argument("--timesteps", type=int, nargs="+", default=list(d.timesteps))
    for name in ("num_entities", "train_questions", "test_questions", "eval_every", "curve_episodes",
                 "n_envs", "workers"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    p.add_argument("--out", default=d.out)
    ns = p.parse_args(argv)
    return Args(hops=tuple(ns.hops), seeds=tuple(ns.seeds), timesteps=tuple(ns.timesteps), num_entities=ns.num_entities,
                train_questions=ns.train_questions, test_questions=ns.test_questions, eval_every=ns.eval_every,
                curve_episodes=ns.curve_episodes, n_envs=ns.n_envs, workers=ns.workers, out=ns.out)


def main(argv: list[str] | None = None) -> None:
    import threading

    from tqdm import tqdm

    # tqdm's default lock is a multiprocessing one, which a spawn pool reports as leaked at exit.
    tqdm.set_lock(threading.RLock())
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    jobs = [(args, h, s) for h in args.hops for s in args.seeds]
    # spawn, not fork: torch and numba do not survive a fork of a process that has used them.
    pool = mp.get_context("spawn").Pool(args.workers)
    try:
        pending = pool.imap_unordered(train_job, jobs)
        results: dict = {str(h): baselines(args, h) for h in args.hops}
        runs = list(tqdm(pending, total=len(jobs), desc="PPO runs"))
    except BaseException:
        pool.terminate()
        raise
    finally:
        # close + join, not terminate: killed workers leave their semaphores for the resource tracker.
        pool.close()
        pool.join()
    for h in args.hops:
        results[str(h)]["PPO"] = [r["test_em"] for r in sorted(runs, key=lambda r: r["seed"]) if r["hops"] == h]
    wall = time.perf_counter() - start
    text = table(args, results)
    (out / "results.md").write_text(text + "\n")
    report = {"args": asdict(args), "results": results, "runs": runs, "wall_s": wall}
    (out / "results.json").write_text(json.dumps(report, indent=1))
    plot(args, runs, results, out / "learning_curve.png")
    print(text)
    ordered = sorted(runs, key=lambda r: (r["hops"], r["seed"]))
    print(f"\nwall time {wall:.0f} s; PPO training s per run: "
          + ", ".join(f"{r['hops']}-hop seed {r['seed']}: {r['train_s']:.0f}" for r in ordered))
    print(f"wrote {out / 'results.md'}, {out / 'results.json'}, {out / 'learning_curve.png'}")


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))

"""Greedy evaluation of the policy during training (before the first and after the last step)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import gymnasium as gym
import numpy as np

from agents.rollout import RolloutConfig, RolloutEngine
from agents.train.metrics import episode_summaries


def greedy_eval(policy, make_env: Callable[[], gym.Env], engine_config: RolloutConfig, count: int) -> dict[str, float]:
    """EM, F1 and searches per episode of one greedy rollout of each of the env's first `count` questions."""
    engine = RolloutEngine(policy, make_env, replace(engine_config, group_size=1, temperature=0.0, seed=None))
    try:
        n = min(count, len(make_env().unwrapped.records))
        trajectories = engine.rollout([{"options": {"index": i}} for i in range(n)])
    finally:
        engine.close()
    return eval_metrics(episode_summaries(trajectories))


def eval_metrics(summaries: list[dict]) -> dict[str, float]:
    """EM, F1 and searches per episode over episode summaries (`info["episode"]`; {} for an episode without one),
    one per question: the evaluation's metrics whoever ran the episodes."""
    return {
        "eval/em": float(np.mean([s.get("em", 0.0) for s in summaries])),
        "eval/f1": float(np.mean([s.get("f1", 0.0) for s in summaries])),
        "eval/searches": float(np.mean([s.get("searches", 0) for s in summaries])),
        "eval/questions": float(len(summaries)),
    }

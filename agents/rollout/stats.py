"""Batch statistics of rollouts, under namespaced metric names (`rollout/...`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from agents.rollout.trajectory import EpisodeEnd, Trajectory

ENDS: tuple[str, ...] = get_args(EpisodeEnd)


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Means over the batch; `rollout/end/<reason>` are the shares of each way episodes ended."""
    n = len(trajectories)
    if n == 0:
        return {}
    metrics = {
        "rollout/episodes": float(n),
        "rollout/reward_mean": sum(t.reward for t in trajectories) / n,
        "rollout/turns_mean": sum(t.num_turns for t in trajectories) / n,
        "rollout/searches_mean": sum(sum(i.get("action") == "search" for i in t.step_infos) for t in trajectories) / n,
        "rollout/invalid_actions_mean": sum(sum(bool(i.get("invalid_action")) for i in t.step_infos) for t in trajectories) / n,
        "rollout/sampled_tokens_mean": sum(t.num_sampled_tokens for t in trajectories) / n,
        "rollout/tokens_mean": sum(len(t.token_ids) for t in trajectories) / n,
    }
    for end in ENDS:
        metrics[f"rollout/end/{end}"] = sum(t.finish_reason == end for t in trajectories) / n
    return metrics

"""Batch statistics of rollouts, under namespaced metric names (`rollout/...`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from agents.rollout.trajectory import EpisodeEnd, Trajectory
from searchgym.info import final_entity_rate, final_labels

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


def credit_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """What the env's credit signals say about the batch, read from the step infos (`searchgym.info`):

    - `credit/retrieval_utility`, `credit/reasoning_correctness`, `credit/contribution`: the judge's u, v
      and p = u * v, averaged over the labelled search rounds of the batch (the episode summary's final
      labels when the env ended the episode, else the step labels that are not pending);
    - `credit/labelled_rounds`, `credit/judge_failures`: labelled and failed rounds per episode;
    - `credit/entity_rate`: gamma, the share of gold entities matched in the thinking text, averaged over
      the episodes whose question has gold entities (the summary's `entity_rate`, else the last step's).

    A value with nothing to average over (no labelled round, no gold entities) is left out."""
    n = len(trajectories)
    if n == 0:
        return {}
    rounds = [lab for t in trajectories for lab in final_labels(t.step_infos)]
    rates = [rate for t in trajectories if (rate := final_entity_rate(t.step_infos)) is not None]
    metrics = {
        "credit/labelled_rounds": len(rounds) / n,
        "credit/judge_failures": sum(bool(lab.get("failed")) for lab in rounds) / n,
    }
    if rounds:
        for key in ("retrieval_utility", "reasoning_correctness", "contribution"):
            metrics[f"credit/{key}"] = sum(float(lab[key]) for lab in rounds) / len(rounds)  # type: ignore[literal-required]
    if rates:
        metrics["credit/entity_rate"] = sum(rates) / len(rates)
    return metrics

"""E-GRPO: entity-aware GRPO. How it differs from plain GRPO (`agents.learners.grpo`):

1. The reward of a wrong answer is not 0 but alpha * gamma_hat_i, where gamma_i is the share of the
   question's gold entities found by exact string match in trajectory i's thinking text (step info
   `info["entities"]["rate"]`, the episode's `entity_rate`; the learner asks the env for the paper's exact
   rule, `entity_match="normalized"` ignores case, accents, punctuation and articles instead), and
   gamma_hat_i = gamma_i / max_j gamma_j over the group (0 when the maximum is 0). A near miss that found
   the right entities beats a blind one.
2. A correct answer gets 1; a format error or an over-long rollout gets 0. alpha = 0.3 is the paper's
   best; alpha = 0 is GRPO.
3. Over-long rollouts keep their 0 in the group's mean and std but are dropped from the loss
   (`agents.core.drop_rollouts`): their cut-off text should not be pushed down token by token.
4. KL-free with clip-higher and no dual clip (the `GRPOConfig` defaults), as the paper trains.

Choices where the method's description is silent:
- gamma_hat's maximum runs over the whole group, format errors and over-long rollouts included.
- A format error is the env's `episode["format_valid"] == False`, which also covers a trajectory that ran
  out of turns without answering; it takes precedence over correctness. Format errors stay in the loss
  (`drop_format_errors=False`) since that is what teaches the format.
- "Correct" means the configured outcome (`reward_key`, EM by default) equals 1.
- A question without gold entities has gamma = 0 for every rollout, so wrong answers get 0 (GRPO).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

import torch

from agents.core import drop_rollouts, rollout_drop_mask
from agents.learners.batch import LearnerBatch, Trajectory
from agents.learners.grpo import GRPOConfig, RewardKey, grpo_advantages, outcome_reward
from agents.learners.registry import EnvNeeds, register_learner
from searchgym.entities import relative_rates
from searchgym.envs.search_qa import EntityMatch
from searchgym.errors import BatchError, ConfigError
from searchgym.info import StepInfo

__all__ = ["EGRPOConfig", "batch_advantages", "entity_aware_rewards", "entity_rate", "format_error", "group_rewards", "loss_mask"]


@dataclass
class EGRPOConfig(GRPOConfig):
    """GRPO's options plus the entity reward's weight."""

    alpha: float = 0.3
    """Weight of the normalized entity match rate in a wrong answer's reward; 0 is GRPO."""
    drop_format_errors: bool = False
    """Also drop format errors from the loss (E-GRPO drops only over-long rollouts)."""
    entity_match: EntityMatch = "exact"
    """How the env matches a gold entity in the thinking text: `exact`, the verbatim string (the paper's
    rule), or `normalized` (case, accents, punctuation and articles ignored, whole phrases)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.entity_match not in get_args(EntityMatch):
            raise ConfigError(f"entity_match must be one of {get_args(EntityMatch)}, got {self.entity_match!r}")
        if not 0 <= self.alpha <= 1:
            raise ConfigError(
                f"alpha must be in [0, 1] so a wrong answer never outscores a right one, got {self.alpha}"
            )


def entity_aware_rewards(
    correct: Sequence[bool],
    rates: Sequence[float],
    *,
    format_error: Sequence[bool],
    overlong: Sequence[bool],
    alpha: float = 0.3,
) -> list[float]:
    """E-GRPO rewards of one group of G rollouts (all arguments have G entries).

    >>> entity_aware_rewards([True, False, False], [1.0, 0.5, 0.25], format_error=[False] * 3, overlong=[False] * 3)
    [1.0, 0.15, 0.075]
    """
    size = len(correct)
    if not (len(rates) == len(format_error) == len(overlong) == size):
        raise BatchError(
            f"one value per rollout needed: {size} correct, {len(rates)} rates, "
            f"{len(format_error)} format flags, {len(overlong)} over-long flags"
        )
    if not 0 <= alpha <= 1:
        raise ConfigError(f"alpha must be in [0, 1], got {alpha}")
    if any(not 0 <= r <= 1 for r in rates):
        raise BatchError(f"entity match rates must be in [0, 1], got {list(rates)}")
    gamma_hat = relative_rates(rates)
    rewards = []
    for ok, g, bad_format, too_long in zip(correct, gamma_hat, format_error, overlong):
        if bad_format or too_long:
            rewards.append(0.0)
        elif ok:
            rewards.append(1.0)
        else:
            rewards.append(alpha * g)
    return rewards


def entity_rate(infos: Sequence[StepInfo]) -> float:
    """gamma of a trajectory: the episode's `entity_rate`, else the last step's `entities.rate`, else 0."""
    if not infos:
        return 0.0
    last = infos[-1]
    episode = last.get("episode")
    if episode is not None and episode.get("entity_rate") is not None:
        return float(episode["entity_rate"])
    entities = last.get("entities")
    return float(entities["rate"]) if entities else 0.0


def format_error(infos: Sequence[StepInfo]) -> bool:
    """True unless the trajectory ended with a well-formed answer (`episode["format_valid"]`)."""
    if not infos:
        return True
    episode = infos[-1].get("episode")
    return episode is None or not episode.get("format_valid", False)


def group_rewards(
    trajectories: Sequence[Sequence[StepInfo]],
    overlong: Sequence[bool],
    *,
    alpha: float = 0.3,
    reward_key: RewardKey = "em",
) -> list[float]:
    """E-GRPO rewards of one group from its trajectories' step infos and the rollouts' over-long flags
    (the rollout knows when a generation hit its token budget; the env does not)."""
    if len(overlong) != len(trajectories):
        raise BatchError(f"{len(overlong)} over-long flags for {len(trajectories)} trajectories")
    correct = [bool(infos) and outcome_reward(infos, reward_key) >= 1.0 for infos in trajectories]
    return entity_aware_rewards(
        correct,
        [entity_rate(infos) for infos in trajectories],
        format_error=[format_error(infos) for infos in trajectories],
        overlong=overlong,
        alpha=alpha,
    )


def signal_from_partial_credit_only(rewards: Sequence[float]) -> bool:
    """True when a group's E-GRPO rewards differ but its outcome rewards (1 for correct, else 0) would not:
    the group teaches something only thanks to the partial credit of wrong answers.

    >>> signal_from_partial_credit_only([0.0, 0.3, 0.1])
    True
    >>> signal_from_partial_credit_only([1.0, 0.3, 0.0]), signal_from_partial_credit_only([0.0, 0.0])
    (False, False)
    """
    outcome = {r >= 1.0 for r in rewards}
    return len(outcome) == 1 and max(rewards) != min(rewards)


def loss_mask(
    mask: torch.Tensor, overlong: Sequence[bool], format_errors: Sequence[bool], config: EGRPOConfig
) -> torch.Tensor:
    """The rollout's loss mask (B, T) with over-long rollouts (and, if configured, format errors) zeroed."""
    drop = rollout_drop_mask(overlong, format_errors, drop_overlong=True, drop_format_error=config.drop_format_errors)
    return drop_rollouts(mask, drop)


@register_learner("e-grpo", config=EGRPOConfig, needs=EnvNeeds(gold_entities=True, env_options=lambda c: {"entity_match": c.entity_match}),
                  summary="partial credit for wrong answers from the gold-entity match rate")
def batch_advantages(trajectories: Sequence[Trajectory], config: EGRPOConfig) -> LearnerBatch:
    """E-GRPO targets: entity-aware rewards per group, GRPO advantages over them (over-long rollouts
    included in the statistics), over-long rollouts (and optionally format errors) left out of the loss."""
    by_group: dict[int, list[int]] = {}
    for i, t in enumerate(trajectories):
        by_group.setdefault(t.group, []).append(i)
    rewards = [0.0] * len(trajectories)
    overlong = [t.finish_reason == "over_long" for t in trajectories]
    partial_only = 0
    for members in by_group.values():
        values = group_rewards([trajectories[i].step_infos for i in members], [overlong[i] for i in members], alpha=config.alpha, reward_key=config.reward_key)
        for i, r in zip(members, values):
            rewards[i] = r
        partial_only += signal_from_partial_credit_only(values)
    reward_tensor = torch.tensor(rewards, dtype=torch.float64)
    advantages, keep = grpo_advantages(reward_tensor, config, torch.tensor([t.group for t in trajectories]))
    errors = [format_error(t.step_infos) for t in trajectories]
    include = [bool(k) and not o and not (config.drop_format_errors and e) for k, o, e in zip(keep.tolist(), overlong, errors)]
    return LearnerBatch(
        advantages=[torch.full((len(t.token_ids),), float(a)) for t, a in zip(trajectories, advantages.tolist())],
        include=include,
        rewards=rewards,
        metrics={
            "e_grpo/entity_rate": sum(entity_rate(t.step_infos) for t in trajectories) / max(len(trajectories), 1),
            "e_grpo/partial_credit_share": sum(0 < r < 1 for r in rewards) / max(len(rewards), 1),
            "e_grpo/partial_credit_only_groups": partial_only / max(len(by_group), 1),
        },
    )

"""GRPO: the base every other learner changes in a few numbered ways.

Per question, G rollouts are sampled. Each gets an outcome reward r_i from the env's step info (exact
match of the final answer by default), and one advantage A_i = (r_i - mean(r)) / (std(r) + eps) over its
group, applied to every token the policy sampled. The loss is the clipped surrogate of `agents.core`, the
registered policy loss `clipped` (`GRPOConfig.policy_loss`; a learner may name another).

Options every learner inherits (all in `GRPOConfig`):
1. DAPO clip-higher: eps_low 0.2, eps_high 0.28 (set both to 0.2 for PPO/GRPO's symmetric clip).
2. Token-mean aggregation (DAPO) by default; `seq-mean` is the original GRPO.
3. KL-free by default; `kl_coef > 0` adds a k3 KL to a frozen reference (learners whose official runs use
   one default to it: CW-GRPO and COSEARCH, 0.001).
4. `scale="none"` is Dr.GRPO's mean-only advantage.
5. `dynamic_sampling` drops groups whose rewards are all equal (DAPO).
6. `clip_ratio_c` is dual-clip PPO (off here; 3 in CW-GRPO and COSEARCH, verl's default that their
   official runs inherit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

import torch

from agents.core import AGGREGATIONS, AdvantageScale, Aggregation, LossSettings, dynamic_sampling_mask, group_advantages
from agents.learners.batch import LearnerBatch, Trajectory
from agents.learners.registry import register_learner
from searchgym.errors import BatchError, ConfigError
from searchgym.info import StepInfo

__all__ = ["REWARD_KEYS", "GRPOConfig", "RewardKey", "batch_advantages", "grpo_advantages", "outcome_reward"]

RewardKey = Literal["em", "f1", "cover_em", "answer"]
"""Which outcome the reward is: `em`, `f1`, `cover_em` (always reported by the env) or `answer` (the
env's configured answer reward, i.e. the reward `step` returned on the answering step)."""
REWARD_KEYS: tuple[str, ...] = get_args(RewardKey)


@dataclass
class GRPOConfig:
    """The GRPO core's options; the other learners' configs extend this one."""

    policy_loss: ClassVar[str] = "clipped"
    """The registered policy loss (`agents.core.register_policy_loss`) that trains every model of the learner:
    the clipped PPO / GRPO / DAPO loss here; a learner with another loss names it in its config class."""

    reward_key: RewardKey = "em"
    """The outcome reward read from step info."""
    scale: AdvantageScale = "std"
    """`std`: GRPO's (r - mean) / (std + eps); `none`: Dr.GRPO's r - mean."""
    eps: float = 1e-6
    """Added to the group std before dividing."""
    unbiased_std: bool = True
    """Divide squared deviations by G - 1 (torch.std's default, as TRL and verl do) rather than G."""
    eps_low: float = 0.2
    """Lower clip: the ratio is clipped at 1 - eps_low."""
    eps_high: float = 0.28
    """Upper clip: the ratio is clipped at 1 + eps_high (DAPO's clip-higher when > eps_low)."""
    aggregation: Aggregation = "token-mean"
    """`token-mean`, `seq-mean` or `seq-mean-token-sum-norm` (see `agents.core.aggregate`)."""
    kl_coef: float = 0.0
    """Weight of the k3 KL to the reference model; 0 trains KL-free and loads no reference."""
    dynamic_sampling: bool = False
    """Drop groups whose rewards are all equal (they carry no gradient)."""
    clip_ratio_c: float | None = None
    """Dual clip (verl's `clip_ratio_c`): for A < 0 the per-token loss is capped at -A * clip_ratio_c; None is
    off. Each batch is updated once on fresh samples, so the ratio starts at 1 and this binds only when the
    sampler's logprobs are far from the trainer's (e.g. an SGLang server on other weights)."""

    def __post_init__(self) -> None:
        if self.reward_key not in REWARD_KEYS:
            raise ConfigError(f"reward_key must be one of {REWARD_KEYS}, got {self.reward_key!r}")
        if self.scale not in get_args(AdvantageScale):
            raise ConfigError(f"scale must be 'std' (GRPO) or 'none' (Dr.GRPO), got {self.scale!r}")
        if not (self.eps >= 0 and math.isfinite(self.eps)):
            raise ConfigError(f"eps must be a finite number >= 0, got {self.eps}")
        if not 0 <= self.eps_low < 1:
            raise ConfigError(f"eps_low must be in [0, 1), got {self.eps_low}")
        if self.eps_high < 0:
            raise ConfigError(f"eps_high must be >= 0, got {self.eps_high}")
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.kl_coef < 0:
            raise ConfigError(f"kl_coef must be >= 0 (0 = KL-free), got {self.kl_coef}")
        if self.clip_ratio_c is not None and not self.clip_ratio_c > 1:
            raise ConfigError(f"clip_ratio_c must be > 1 (verl uses 3), or None for no dual clip; got {self.clip_ratio_c}")
        self.loss_settings()  # the loss's own checks of these settings, before any step

    def loss_settings(self, token_budget: int | None = None) -> LossSettings:
        """The policy loss's settings, read from this config: the one place they are, for every model the
        learner trains (the policy in the trainer, COSEARCH's ranker in `cosearch_ranker`). `token_budget` is
        that model's generation budget, the norm length of `seq-mean-token-sum-norm` (Dr.GRPO)."""
        return LossSettings(name=self.policy_loss, eps_low=self.eps_low, eps_high=self.eps_high,
                            aggregation=self.aggregation, kl_coef=self.kl_coef, clip_ratio_c=self.clip_ratio_c,
                            norm_length=token_budget)


def outcome_reward(infos: Sequence[StepInfo], key: RewardKey = "em") -> float:
    """The trajectory's outcome reward from its step infos (the last one ends the episode).

    Reads the episode summary (`info["episode"][key]`) when the last info has one, else the last step's
    `info["reward"][key]`; `answer` is only in `info["reward"]`. A trajectory that ran out of turns has
    no answer and scores 0.
    """
    if key not in REWARD_KEYS:
        raise ConfigError(f"reward key must be one of {REWARD_KEYS}, got {key!r}")
    if not infos:
        raise BatchError("a trajectory needs at least one step info to be scored")
    last = infos[-1]
    episode = last.get("episode")
    if episode is not None and key in episode:
        return float(episode[key])
    return float(last.get("reward", {}).get(key, 0.0))


def grpo_advantages(
    rewards: torch.Tensor, config: GRPOConfig, group_ids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, keep) for rewards (num_groups, G), or (N,) with `group_ids` (N,).

    `advantages` has `rewards`' shape. `keep` is the dynamic-sampling mask ((num_groups,) grouped,
    (N,) flat), all True when `config.dynamic_sampling` is off; the trainer drops the rest.
    """
    advantages = group_advantages(rewards, group_ids, scale=config.scale, eps=config.eps, unbiased=config.unbiased_std)
    if config.dynamic_sampling:
        keep = dynamic_sampling_mask(rewards, group_ids)
    else:
        keep = torch.ones(rewards.shape[0] if group_ids is None else rewards.shape, dtype=torch.bool)
    return advantages, keep


@register_learner("grpo", config=GRPOConfig,
                  summary="outcome reward (EM), one group-normalized advantage per trajectory")
def batch_advantages(trajectories: Sequence[Trajectory], config: GRPOConfig) -> LearnerBatch:
    """GRPO targets for rollout trajectories (`agents.rollout.Trajectory`, grouped by `.group`): the
    outcome reward from step info, one group-normalized advantage copied to every token."""
    rewards = torch.tensor([outcome_reward(t.step_infos, config.reward_key) if t.step_infos else 0.0 for t in trajectories], dtype=torch.float64)
    advantages, keep = grpo_advantages(rewards, config, torch.tensor([t.group for t in trajectories]))
    return LearnerBatch(
        advantages=[torch.full((len(t.token_ids),), float(a)) for t, a in zip(trajectories, advantages.tolist())],
        include=[bool(k) for k in keep.tolist()],
        rewards=rewards.tolist(),
    )

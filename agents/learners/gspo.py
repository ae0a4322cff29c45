"""GSPO: Group Sequence Policy Optimization (Zheng et al. 2025). How it differs from plain GRPO
(`agents.learners.grpo`):

1. The importance ratio is the sequence's, not the token's: s_i = (pi(y_i|x) / pi_old(y_i|x))^(1/|y_i|)
   = exp(mean over the sequence's loss tokens of log pi - log pi_old). The 1/|y_i| makes it a per-token
   geometric mean, so sequences of every length share one clip range.
2. s_i is clipped at [1 - eps_low, 1 + eps_high] with the paper's ranges, eps_low = 3e-4 and eps_high = 4e-4
   (a geometric mean over many tokens moves far less than one token's ratio, hence ranges some 700 times
   narrower than GRPO's 0.2 / 0.28). A clip cuts the gradient of the whole sequence, not of single tokens.
3. The objective is averaged over sequences, J = mean_i min(s_i A_i, clip(s_i) A_i) (`aggregation="seq-mean"`),
   where GRPO's default averages over tokens.
4. The advantages are GRPO's group advantages, unchanged: one A_i per trajectory from its outcome reward.
5. No dual clip: the paper has none (`clip_ratio_c` must stay None). KL-free by default, like GRPO here.

GSPO or GSPO-token: the loss (`gspo_loss`, registered as `gspo`) is written in the form of GSPO-token, the
paper's token-level variant: at each loss token, s_i,t = sg[s_i] * pi(y_i,t) / sg[pi(y_i,t)], whose value is
s_i and whose gradient is s_i times that token's score, clipped like s_i, with advantage A_i,t. When every
token of a sequence has the same advantage, as this learner's do, the mean over the sequence's tokens of that
loss has exactly GSPO's value and gradient (s_i's gradient is s_i times the mean of the tokens' scores), so
this learner is GSPO; the tests check both against GSPO's formula. The token form is the one chosen because
learners hand the loss per-token advantages ((B, T)): a learner that gives a sequence's tokens different
advantages and names this loss gets GSPO-token, the paper's definition for that case, instead of an error.

Choices where the paper is silent:
- |y_i| counts the sequence's loss tokens: in a multi-turn trajectory, every token the policy sampled in any
  turn; prompt and retrieved text are not part of y_i.
- The clip fractions are shares of loss tokens, as for every loss (`PolicyLoss`): a clipped sequence counts
  with its length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from agents.core import Aggregation, LossSettings, PolicyLoss, policy_loss_from_tokens, register_policy_loss
from agents.core.aggregation import check_bt, token_advantages
from agents.learners.batch import LearnerBatch, Trajectory
from agents.learners.grpo import GRPOConfig
from agents.learners.grpo import batch_advantages as grpo_batch_advantages
from agents.learners.registry import register_learner
from searchgym.errors import BatchError, ConfigError

__all__ = ["GSPOConfig", "batch_advantages", "gspo_loss", "sequence_log_ratio", "sequence_ratio"]


def _check_settings(settings: LossSettings) -> None:
    if settings.clip_ratio_c is not None:
        raise ConfigError(f"GSPO has no dual clip: leave clip_ratio_c at None (got {settings.clip_ratio_c})")


def sequence_log_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """log s_i = mean over row i's loss tokens of logprobs - old_logprobs: (B,) from (B, T) inputs, 0 for a row
    without loss tokens."""
    keep = loss_mask.bool()
    # Zero the log-ratio off the mask: padding may hold -inf log-probs (inf - inf is NaN, even masked out).
    log_ratio = torch.where(keep, logprobs - old_logprobs, torch.zeros_like(logprobs))
    return log_ratio.sum(dim=1) / keep.sum(dim=1).clamp(min=1)


def sequence_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """GSPO's s_i = (pi(y_i|x) / pi_old(y_i|x))^(1/|y_i|), (B,) from (B, T) inputs; 1 for a row without loss
    tokens. Differentiable: its gradient is s_i times the mean of the loss tokens' scores (grad log pi).

    >>> round(sequence_ratio(torch.tensor([[0.3, -0.1, 0.1]]), torch.zeros(1, 3), torch.ones(1, 3)).item(), 6)
    1.105171
    """
    return torch.exp(sequence_log_ratio(logprobs, old_logprobs, loss_mask))


@register_policy_loss("gspo", check=_check_settings)
def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    settings: LossSettings,
    *,
    ref_logprobs: torch.Tensor | None = None,
    denominator: float | torch.Tensor | None = None,
) -> PolicyLoss:
    """GSPO's loss of one batch (in GSPO-token's form, see the module docstring), with `settings`' clip range
    on the sequence ratio, aggregation (`seq-mean` is the paper's) and KL.

    Shapes: `logprobs` (B, T) with grad; `old_logprobs`, `loss_mask` (B, T); `advantages` (B, T) or (B,);
    `ref_logprobs` (B, T) when `settings.kl_coef > 0`. Per loss token: -min(s * A, clip(s, 1 - eps_low,
    1 + eps_high) * A) with s = s_i,t (value s_i). The ratio reported is s_i at each of row i's loss tokens.
    """
    _check_settings(settings)
    shape = logprobs.shape
    if logprobs.dim() != 2:
        raise BatchError(f"logprobs must be (B, T); got shape {tuple(shape)}")
    check_bt("old_logprobs", old_logprobs, shape)
    check_bt("loss_mask", loss_mask, shape)
    advantages = token_advantages(advantages, shape)
    keep = loss_mask.bool()
    log_s = sequence_log_ratio(logprobs, old_logprobs, loss_mask).detach()
    # s_i,t = sg[s_i] * pi_t / sg[pi_t]: the value of s_i, the gradient of that one token's log-prob.
    score = torch.where(keep, logprobs - logprobs.detach(), torch.zeros_like(logprobs))
    ratio = torch.where(keep, torch.exp(log_s[:, None] + score), torch.ones_like(logprobs))
    advantages = advantages.to(ratio.dtype)
    clipped = torch.clamp(ratio, 1 - settings.eps_low, 1 + settings.eps_high) * advantages
    per_token = torch.where(keep, -torch.minimum(ratio * advantages, clipped), torch.zeros_like(ratio))
    with torch.no_grad():
        clip_high = keep & (advantages > 0) & (ratio > 1 + settings.eps_high)
        clip_low = keep & (advantages < 0) & (ratio < 1 - settings.eps_low)
    return policy_loss_from_tokens(per_token, ratio, clip_high, clip_low, logprobs, loss_mask, settings,
                                   ref_logprobs=ref_logprobs, denominator=denominator)


@dataclass
class GSPOConfig(GRPOConfig):
    """GRPO's options with GSPO's sequence-level loss, its clip ranges and its average over sequences."""

    policy_loss: ClassVar[str] = "gspo"
    """GSPO's sequence-level clipped loss (`gspo_loss`)."""
    eps_low: float = 3e-4
    """Lower clip of the sequence ratio s_i, clipped at 1 - eps_low: the paper's 3e-4."""
    eps_high: float = 4e-4
    """Upper clip of the sequence ratio s_i, clipped at 1 + eps_high: the paper's 4e-4."""
    aggregation: Aggregation = "seq-mean"
    """The objective averaged over sequences, as the paper defines it (`seq-mean`); the other aggregations of
    `agents.core.aggregate` weigh sequences by their length."""
    clip_ratio_c: float | None = None
    """Must stay None: GSPO has no dual clip (the paper has none)."""


@register_learner("gspo", config=GSPOConfig,
                  summary="GRPO's group advantages with a clipped sequence-level importance ratio (GSPO)")
def batch_advantages(trajectories: Sequence[Trajectory], config: GSPOConfig) -> LearnerBatch:
    """GSPO targets: GRPO's outcome reward and group advantage, one per trajectory, copied to its tokens (the
    loss, not the targets, is where GSPO differs)."""
    return grpo_batch_advantages(trajectories, config)

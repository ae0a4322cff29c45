"""Dr.GRPO: GRPO done right (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective").
How it differs from plain GRPO (`agents.learners.grpo`):

1. Mean-only advantages: A_i = r_i - mean(r) over the group (`scale="none"`). GRPO's division by the group's
   std gives questions whose rewards barely differ (nearly all right or all wrong) larger weights: a bias
   toward too-easy and too-hard questions.
2. A constant normaliser: each sequence's token losses are summed and divided by the rollout's token budget
   (`aggregation="seq-mean-token-sum-norm"`, norm length = `RolloutConfig.max_response_tokens` for the
   policy, `LossSettings.norm_length`), then averaged over the sequences. GRPO's per-sequence mean,
   1 / |o_i|, gives each token of a short answer more weight than each token of a long one, which favours
   short right answers and long wrong ones (the paper's length bias); a constant treats every token alike.
3. Everything else is GRPO's: the outcome reward, the clipped loss (`clipped`) and its options.

Choices where the paper is silent or where this differs from it:
- The token budget is the trajectory's whole generation budget, `max_response_tokens` (in a multi-turn
  episode it also counts observation tokens, so it bounds the policy's tokens too); any constant shared by
  every sequence removes the length bias, and this is the one the rollout enforces.
- GRPO's clip-higher (0.2 / 0.28) stays; the paper's objective clips symmetrically (`eps_high=0.2`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agents.core import AdvantageScale, Aggregation
from agents.learners.batch import LearnerBatch, Trajectory
from agents.learners.grpo import GRPOConfig
from agents.learners.grpo import batch_advantages as grpo_batch_advantages
from agents.learners.registry import register_learner

__all__ = ["DrGRPOConfig", "batch_advantages"]


@dataclass
class DrGRPOConfig(GRPOConfig):
    """GRPO's options with Dr.GRPO's mean-only advantage and constant-length normaliser as defaults."""

    scale: AdvantageScale = "none"
    """`none`: Dr.GRPO's r - mean(r), without dividing by the group's std (`std` is GRPO's)."""
    aggregation: Aggregation = "seq-mean-token-sum-norm"
    """Divide each sequence's token sum by the rollout's token budget, then average over the sequences:
    Dr.GRPO's `seq-mean-token-sum-norm` (`token-mean` and `seq-mean` are DAPO's and GRPO's)."""


@register_learner("dr-grpo", config=DrGRPOConfig,
                  summary="GRPO without its biases: mean-only advantages, token sums over a constant budget (Dr.GRPO)")
def batch_advantages(trajectories: Sequence[Trajectory], config: DrGRPOConfig) -> LearnerBatch:
    """Dr.GRPO targets: the outcome reward minus its group's mean, one per trajectory, copied to its tokens."""
    return grpo_batch_advantages(trajectories, config)

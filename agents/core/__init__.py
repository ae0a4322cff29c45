"""Pure tensor functions shared by every learner: advantages, the clipped loss, KL, masks.

Nothing here knows about environments, models or trainers; every function documents its tensor shapes
(B = sequences, T = tokens, G = rollouts per group) and is tested on hand-built tensors.
"""

from agents.core.advantages import AdvantageScale, dynamic_sampling_mask, group_advantages, group_stats
from agents.core.kl import k3_kl
from agents.core.losses import AGGREGATIONS, Aggregation, PolicyLoss, aggregate, clipped_policy_loss, clipped_surrogate
from agents.core.masks import broadcast_round_advantages, drop_rollouts, rollout_drop_mask

__all__ = [
    "AGGREGATIONS",
    "AdvantageScale",
    "Aggregation",
    "PolicyLoss",
    "aggregate",
    "broadcast_round_advantages",
    "clipped_policy_loss",
    "clipped_surrogate",
    "drop_rollouts",
    "dynamic_sampling_mask",
    "group_advantages",
    "group_stats",
    "k3_kl",
    "rollout_drop_mask",
]

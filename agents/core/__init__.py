"""Pure tensor functions shared by every learner: advantages, policy losses, KL, masks.

Nothing here knows about environments, models or trainers; every function documents its tensor shapes
(B = sequences, T = tokens, G = rollouts per group) and is tested on hand-built tensors. Policy losses are
registered by name (`register_policy_loss`); the clipped PPO / GRPO / DAPO loss is the default, `clipped`.
"""

from agents.core.advantages import AdvantageScale, dynamic_sampling_mask, group_advantages, group_stats
from agents.core.aggregation import AGGREGATIONS, Aggregation, aggregate
from agents.core.kl import k3_kl
from agents.core.losses import clipped_loss, clipped_policy_loss, clipped_surrogate
from agents.core.masks import broadcast_round_advantages, drop_rollouts, rollout_drop_mask
from agents.core.policy_loss import (
    LossSettings,
    PolicyLoss,
    PolicyLossFn,
    compute_policy_loss,
    get_policy_loss,
    policy_loss_from_tokens,
    policy_loss_names,
    register_policy_loss,
    unregister_policy_loss,
)

__all__ = [
    "AGGREGATIONS",
    "AdvantageScale",
    "Aggregation",
    "LossSettings",
    "PolicyLoss",
    "PolicyLossFn",
    "aggregate",
    "broadcast_round_advantages",
    "clipped_loss",
    "clipped_policy_loss",
    "clipped_surrogate",
    "compute_policy_loss",
    "drop_rollouts",
    "dynamic_sampling_mask",
    "get_policy_loss",
    "group_advantages",
    "group_stats",
    "k3_kl",
    "policy_loss_from_tokens",
    "policy_loss_names",
    "register_policy_loss",
    "rollout_drop_mask",
    "unregister_policy_loss",
]

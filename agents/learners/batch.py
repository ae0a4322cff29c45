"""`LearnerBatch`: what every learner hands the trainer for one batch of trajectories."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LearnerBatch:
    """Per-trajectory training targets, aligned with the rollout's trajectories (group-major order)."""

    advantages: list[torch.Tensor]
    """One float tensor per trajectory, as long as its `token_ids`: the advantage of every token (only
    tokens with loss mask 1 matter)."""
    include: list[bool]
    """False drops the trajectory from the loss (kept in group statistics): over-long rollouts in E-GRPO,
    groups removed by dynamic sampling."""
    rewards: list[float]
    """The reward each trajectory's advantage was computed from."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Learner-specific metrics for this batch, namespaced (`cw_grpo/...`)."""

"""`LearnerBatch`, what every learner hands the trainer for one batch of trajectories, and `Trajectory`,
the part of a rollout trajectory a learner reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from searchgym.info import StepInfo


class Trajectory(Protocol):
    """What learners read from a rollout trajectory (`agents.rollout.Trajectory` is one); tests pass
    small stand-ins with these attributes."""

    group: int
    """The question's group: advantages are normalized within a group."""
    token_ids: list[int]
    """The whole sequence; a learner's advantages are as long."""
    step_infos: list[StepInfo]
    """The env's info of every step, in order (the schema of `searchgym.info`)."""
    rounds: Sequence[tuple[int, int]]
    """(start, end) token span of each round (CW-GRPO)."""
    finish_reason: str
    """How the rollout ended; `over_long` is a rollout cut at its token budget (E-GRPO)."""
    gold_answers: list[str] | None
    """The question's gold answers (COSEARCH's ranker reward)."""


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

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
    small stand-ins with these attributes. Read-only: a plain attribute or a property satisfies each."""

    @property
    def group(self) -> int:
        """The question's group: advantages are normalized within a group."""
        ...

    @property
    def token_ids(self) -> Sequence[int]:
        """The whole sequence; a learner's advantages are as long."""
        ...

    @property
    def step_infos(self) -> Sequence[StepInfo]:
        """The env's info of every step, in order (the schema of `searchgym.info`)."""
        ...

    @property
    def rounds(self) -> Sequence[tuple[int, int]]:
        """(start, end) token span of each round (CW-GRPO)."""
        ...

    @property
    def finish_reason(self) -> str:
        """How the rollout ended; `over_long` is a rollout cut at its token budget (E-GRPO)."""
        ...

    @property
    def gold_answers(self) -> Sequence[str] | None:
        """The question's gold answers (COSEARCH's ranker reward)."""
        ...


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

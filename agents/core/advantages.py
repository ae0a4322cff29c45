"""Group-relative advantages and DAPO dynamic sampling.

Two layouts are accepted everywhere in this module:

- grouped: `rewards` is `(num_groups, G)`, row g holding the G rollouts of one question;
- flat: `rewards` is `(N,)` with `group_ids` `(N,)` (any integer labels; groups may differ in size, as
  COSEARCH's ranker clusters do).

Results are per element, in the layout of the input.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

from searchgym.errors import BatchError, ConfigError

__all__ = ["dynamic_sampling_mask", "group_advantages", "group_stats"]

AdvantageScale = Literal["std", "none"]
"""`std`: GRPO, (r - mean) / (std + eps). `none`: Dr.GRPO, r - mean (no division by the group's std)."""


def _flatten(rewards: torch.Tensor, group_ids: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(flat float rewards (N,), dense group index (N,) in [0, num_groups), num_groups)."""
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.get_default_dtype())
    if group_ids is None:
        if rewards.dim() != 2:
            raise BatchError(f"without group_ids, rewards must be (num_groups, G); got shape {tuple(rewards.shape)}")
        num_groups, size = rewards.shape
        index = torch.arange(num_groups, device=rewards.device).repeat_interleave(size)
        return rewards.reshape(-1), index, num_groups
    if rewards.dim() != 1 or group_ids.shape != rewards.shape:
        raise BatchError(
            "with group_ids, rewards and group_ids must both be (N,); "
            f"got {tuple(rewards.shape)} and {tuple(group_ids.shape)}"
        )
    if group_ids.is_floating_point():
        raise BatchError("group_ids must be integer labels")
    _, index = torch.unique(group_ids, return_inverse=True)
    num_groups = int(index.max().item()) + 1 if index.numel() else 0
    return rewards, index, num_groups


def group_stats(
    rewards: torch.Tensor, group_ids: torch.Tensor | None = None, *, unbiased: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each element's group mean and group standard deviation, in the layout of `rewards`.

    Shapes: `rewards` (num_groups, G) or (N,) with `group_ids` (N,); both outputs have `rewards`' shape.
    `unbiased=True` divides the squared deviations by n - 1 (`torch.std`'s default, as TRL and verl do);
    a group of one rollout then has std 0, not NaN.
    """
    flat, index, num_groups = _flatten(rewards, group_ids)
    zeros = torch.zeros(num_groups, dtype=flat.dtype, device=flat.device)
    counts = zeros.index_add(0, index, torch.ones_like(flat))
    mean = zeros.index_add(0, index, flat) / counts.clamp(min=1)
    squared = zeros.index_add(0, index, (flat - mean[index]) ** 2)
    dof = counts - 1 if unbiased else counts
    std = torch.where(dof > 0, squared / dof.clamp(min=1), zeros).sqrt()
    shape = rewards.shape
    return mean[index].reshape(shape), std[index].reshape(shape)


def group_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor | None = None,
    *,
    scale: AdvantageScale = "std",
    eps: float = 1e-6,
    unbiased: bool = True,
) -> torch.Tensor:
    """GRPO's group-relative advantage of every rollout.

    `scale="std"`: A_i = (r_i - mean(r)) / (std(r) + eps) over the rollout's group (GRPO).
    `scale="none"`: A_i = r_i - mean(r) (Dr.GRPO: dividing by the std up-weights near-uniform groups).

    Shapes: `rewards` (num_groups, G), or (N,) with `group_ids` (N,); returns `rewards`' shape.

    >>> group_advantages(torch.tensor([[1.0, 0.0]]), scale="none")
    tensor([[ 0.5000, -0.5000]])
    """
    if scale not in get_args(AdvantageScale):
        raise ConfigError(f"scale must be 'std' (GRPO) or 'none' (Dr.GRPO), got {scale!r}")
    if eps < 0:
        raise ConfigError(f"eps must be >= 0, got {eps}")
    mean, std = group_stats(rewards, group_ids, unbiased=unbiased)
    centered = rewards.to(mean.dtype) - mean
    if scale == "none":
        return centered
    # With eps = 0 an all-equal group would be 0 / 0; its centered rewards are exactly 0, so is A.
    scale_by = std + eps
    return torch.where(
        scale_by > 0, centered / scale_by.clamp(min=torch.finfo(centered.dtype).tiny), torch.zeros_like(centered)
    )


def dynamic_sampling_mask(
    rewards: torch.Tensor, group_ids: torch.Tensor | None = None, *, atol: float = 0.0
) -> torch.Tensor:
    """DAPO dynamic sampling: which groups to keep, dropping those whose rewards are all equal.

    Such a group has zero advantage everywhere, so it adds nothing to the gradient but still counts in a
    token-mean denominator. Rewards count as equal when max - min <= `atol` (exact by default).

    Shapes: `rewards` (num_groups, G) -> bool (num_groups,); `rewards` (N,) with `group_ids` (N,) ->
    bool (N,), True for every element of a kept group. A group of one rollout is always dropped.
    """
    flat, index, num_groups = _flatten(rewards, group_ids)
    empty = torch.zeros(num_groups, dtype=flat.dtype, device=flat.device)
    hi = empty.scatter_reduce(0, index, flat, reduce="amax", include_self=False)
    lo = empty.scatter_reduce(0, index, flat, reduce="amin", include_self=False)
    keep = (hi - lo) > atol
    return keep if group_ids is None else keep[index]

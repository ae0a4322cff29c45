"""Loss masks for whole rollouts, and per-round advantages spread over tokens.

A rollout can be kept in its group's reward statistics but dropped from the loss (E-GRPO does this for
over-long rollouts: their reward 0 still moves the group mean and std, but their truncated tokens get no
gradient). The two steps are separate on purpose: compute advantages over the whole group first, then
zero the dropped rows of the loss mask with `drop_rollouts`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from searchgym.errors import BatchError

__all__ = ["broadcast_round_advantages", "drop_rollouts", "rollout_drop_mask"]


def _as_bool(name: str, flags: Sequence[bool] | torch.Tensor, size: int) -> torch.Tensor:
    out = torch.as_tensor(flags, dtype=torch.bool)
    if out.shape != (size,):
        raise BatchError(f"{name} must have one flag per rollout ({size}); got shape {tuple(out.shape)}")
    return out


def rollout_drop_mask(
    overlong: Sequence[bool] | torch.Tensor,
    format_error: Sequence[bool] | torch.Tensor | None = None,
    *,
    drop_overlong: bool = True,
    drop_format_error: bool = False,
) -> torch.Tensor:
    """Which rollouts to leave out of the loss, (B,) bool.

    `overlong` (B,): the rollout ran out of its token or context budget (a truncated generation, not an
    episode that ran out of turns). `format_error` (B,): the trajectory is malformed. By default only
    over-long rollouts are dropped, as E-GRPO does; a format error keeps its (zero) reward in the loss,
    which is what teaches the policy the format.
    """
    drop = _as_bool("overlong", overlong, len(overlong)) & drop_overlong
    if format_error is not None:
        drop = drop | (_as_bool("format_error", format_error, drop.shape[0]) & drop_format_error)
    return drop


def drop_rollouts(loss_mask: torch.Tensor, drop: Sequence[bool] | torch.Tensor) -> torch.Tensor:
    """`loss_mask` (B, T) with the rows where `drop` (B,) is True set to 0; same dtype and shape."""
    if loss_mask.dim() != 2:
        raise BatchError(f"loss_mask must be (B, T); got shape {tuple(loss_mask.shape)}")
    drop = _as_bool("drop", drop, loss_mask.shape[0]).to(loss_mask.device)
    return torch.where(drop[:, None], torch.zeros_like(loss_mask), loss_mask)


def broadcast_round_advantages(
    round_advantages: Sequence[Sequence[float]],
    spans: Sequence[Sequence[tuple[int, int]]],
    seq_len: int,
    *,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Per-token advantages (B, T) from one advantage per round.

    `round_advantages[b][k]` is round k's advantage in trajectory b; `spans[b][k] = (start, end)` is the
    half-open token range [start, end) that round k's policy output occupies in row b (from the
    rollout). Tokens outside every span (prompt, retrieved text, padding) get 0; the loss mask removes
    them anyway. Spans must lie in [0, seq_len], be ordered and not overlap.
    """
    if len(round_advantages) != len(spans):
        raise BatchError(f"{len(round_advantages)} trajectories of advantages but {len(spans)} of spans")
    out = torch.zeros(len(spans), seq_len, dtype=dtype)
    for b, (advs, row) in enumerate(zip(round_advantages, spans)):
        if len(advs) != len(row):
            raise BatchError(f"trajectory {b}: {len(advs)} round advantages for {len(row)} token spans")
        previous_end = 0
        for k, (start, end) in enumerate(row):
            if not previous_end <= start <= end <= seq_len:
                raise BatchError(
                    f"trajectory {b}, round {k}: span ({start}, {end}) must satisfy "
                    f"{previous_end} <= start <= end <= {seq_len} (ordered, non-overlapping, inside the sequence)"
                )
            out[b, start:end] = float(advs[k])
            previous_end = end
    return out

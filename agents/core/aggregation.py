"""How per-token values (a loss, a KL) become one number, the three aggregations every policy loss shares, and
the (B, T) shape checks of a loss's inputs."""

from __future__ import annotations

from typing import Literal, get_args

import torch

from searchgym.errors import BatchError, ConfigError

__all__ = ["AGGREGATIONS", "Aggregation", "aggregate", "check_bt", "token_advantages"]

Aggregation = Literal["token-mean", "seq-mean", "seq-mean-token-sum-norm"]
"""How per-token values become one number:

- `token-mean` (DAPO): every loss token of the batch weighs the same; sum / number of loss tokens.
- `seq-mean` (GRPO's original): mean over each sequence's loss tokens, then mean over the sequences that
  have any (a sequence dropped from the loss does not dilute the others).
- `seq-mean-token-sum-norm` (Dr.GRPO): sum over each sequence's tokens divided by a constant
  `norm_length`, then mean over all B sequences, so long answers are not down-weighted per token.
"""
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)


def check_bt(name: str, tensor: torch.Tensor, shape: torch.Size) -> None:
    """A `BatchError` unless `tensor` has the (B, T) `shape` of the batch."""
    if tensor.shape != shape:
        raise BatchError(f"{name} has shape {tuple(tensor.shape)}; expected (B, T) = {tuple(shape)}")


def token_advantages(advantages: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """`advantages` as (B, T) = `shape`: a (B,) tensor (one per sequence) is broadcast over each row's tokens,
    a (B, T) one is checked; a `BatchError` for anything else."""
    if advantages.dim() == 1:
        if advantages.shape[0] != shape[0]:
            raise BatchError(f"advantages has {advantages.shape[0]} entries for {shape[0]} sequences")
        advantages = advantages[:, None].expand(shape)
    check_bt("advantages", advantages, shape)
    return advantages


def safe_div(numerator: torch.Tensor, denominator: torch.Tensor | float) -> torch.Tensor:
    """numerator / denominator, or a 0 that keeps the autograd graph when the denominator is 0."""
    denominator = torch.as_tensor(denominator, dtype=numerator.dtype, device=numerator.device)
    return torch.where(
        denominator > 0, numerator / denominator.clamp(min=torch.finfo(numerator.dtype).tiny), numerator * 0
    )


def aggregate(
    values: torch.Tensor,
    mask: torch.Tensor,
    mode: Aggregation = "token-mean",
    *,
    denominator: float | torch.Tensor | None = None,
    norm_length: int | None = None,
) -> torch.Tensor:
    """One scalar from per-token `values` (B, T) over the tokens where `mask` (B, T) is 1.

    `denominator` replaces the local count when the batch is one micro-batch of a larger step, so that
    gradient accumulation reproduces the full-batch loss: the step's total number of loss tokens for
    `token-mean`, its number of sequences for the other two modes. `norm_length` is Dr.GRPO's constant
    (usually the generation budget) and is required by, and only used by, `seq-mean-token-sum-norm`.
    Masked entries of `values` are ignored even when they are NaN or inf.
    """
    check_bt("mask", mask, values.shape)
    if values.dim() != 2:
        raise BatchError(f"values must be (B, T); got shape {tuple(values.shape)}")
    keep = mask.bool()
    masked = torch.where(keep, values, torch.zeros_like(values))
    if mode == "token-mean":
        return safe_div(masked.sum(), keep.sum() if denominator is None else denominator)
    counts = keep.sum(dim=1)
    if mode == "seq-mean":
        per_seq = safe_div(masked.sum(dim=1), counts)
        return safe_div(per_seq.sum(), (counts > 0).sum() if denominator is None else denominator)
    if mode == "seq-mean-token-sum-norm":
        if norm_length is None or norm_length <= 0:
            raise ConfigError(
                f"seq-mean-token-sum-norm needs a positive norm_length (the token budget); got {norm_length}"
            )
        rows = values.shape[0] if denominator is None else denominator
        return safe_div(masked.sum() / norm_length, rows)
    raise ConfigError(f"unknown aggregation {mode!r}; choose one of {AGGREGATIONS}")

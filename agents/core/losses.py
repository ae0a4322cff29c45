"""The clipped policy-gradient loss (PPO / GRPO / DAPO) and loss aggregation.

Per token t of sequence b, with ratio rho = exp(logp - logp_old) and advantage A:

    loss_bt = -min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A)

`eps_high > eps_low` is DAPO's clip-higher: a low-probability token with A > 0 may grow further before its
gradient is cut. Only tokens with `loss_mask == 1` (sampled by the policy) count; prompt and retrieved
text never do. The per-token losses are then aggregated (`aggregate`), optionally plus a k3 KL term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch

from agents.core.kl import k3_kl
from searchgym.errors import BatchError, ConfigError

__all__ = ["AGGREGATIONS", "Aggregation", "PolicyLoss", "aggregate", "clipped_policy_loss", "clipped_surrogate"]

Aggregation = Literal["token-mean", "seq-mean", "seq-mean-token-sum-norm"]
"""How per-token values become one number:

- `token-mean` (DAPO): every loss token of the batch weighs the same; sum / number of loss tokens.
- `seq-mean` (GRPO's original): mean over each sequence's loss tokens, then mean over the sequences that
  have any (a sequence dropped from the loss does not dilute the others).
- `seq-mean-token-sum-norm` (Dr.GRPO): sum over each sequence's tokens divided by a constant
  `norm_length`, then mean over all B sequences, so long answers are not down-weighted per token.
"""
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)


def _check_bt(name: str, tensor: torch.Tensor, shape: torch.Size) -> None:
    if tensor.shape != shape:
        raise BatchError(f"{name} has shape {tuple(tensor.shape)}; expected (B, T) = {tuple(shape)}")


def _safe_div(numerator: torch.Tensor, denominator: torch.Tensor | float) -> torch.Tensor:
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
    _check_bt("mask", mask, values.shape)
    if values.dim() != 2:
        raise BatchError(f"values must be (B, T); got shape {tuple(values.shape)}")
    keep = mask.bool()
    masked = torch.where(keep, values, torch.zeros_like(values))
    if mode == "token-mean":
        return _safe_div(masked.sum(), keep.sum() if denominator is None else denominator)
    counts = keep.sum(dim=1)
    if mode == "seq-mean":
        per_seq = _safe_div(masked.sum(dim=1), counts)
        return _safe_div(per_seq.sum(), (counts > 0).sum() if denominator is None else denominator)
    if mode == "seq-mean-token-sum-norm":
        if norm_length is None or norm_length <= 0:
            raise ConfigError(
                f"seq-mean-token-sum-norm needs a positive norm_length (the token budget); got {norm_length}"
            )
        rows = values.shape[0] if denominator is None else denominator
        return _safe_div(masked.sum() / norm_length, rows)
    raise ConfigError(f"unknown aggregation {mode!r}; choose one of {AGGREGATIONS}")


def clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    clip_ratio_c: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token clipped loss and its diagnostics.

    `clip_ratio_c` (> 1) is dual-clip PPO (Ye et al. 2020; verl's `clip_ratio_c`, 3 there): for A < 0 the
    loss is at most -A * clip_ratio_c, so a token whose ratio ran far above 1 cannot dominate the batch.
    None leaves it off.

    Shapes: `logprobs`, `old_logprobs`, `loss_mask` (B, T); `advantages` (B, T) or (B,) (one per
    sequence, broadcast over its tokens). Returns four (B, T) tensors: the loss (0 where masked), the
    ratio (1 where masked), and bool masks of the loss tokens whose gradient the clip cut on the high
    side (A > 0, ratio > 1 + eps_high) and on the low side (A < 0, ratio < 1 - eps_low).
    """
    if not (0 <= eps_low < 1 and eps_high >= 0):
        raise ConfigError(f"need 0 <= eps_low < 1 and eps_high >= 0; got eps_low={eps_low}, eps_high={eps_high}")
    if clip_ratio_c is not None and not clip_ratio_c > 1:
        raise ConfigError(f"clip_ratio_c must be > 1 (or None for no dual clip), got {clip_ratio_c}")
    shape = logprobs.shape
    if logprobs.dim() != 2:
        raise BatchError(f"logprobs must be (B, T); got shape {tuple(shape)}")
    _check_bt("old_logprobs", old_logprobs, shape)
    _check_bt("loss_mask", loss_mask, shape)
    if advantages.dim() == 1:
        if advantages.shape[0] != shape[0]:
            raise BatchError(f"advantages has {advantages.shape[0]} entries for {shape[0]} sequences")
        advantages = advantages[:, None].expand(shape)
    _check_bt("advantages", advantages, shape)
    keep = loss_mask.bool()
    # Zero the log-ratio off the mask before exp: padding may hold -inf log-probs, and inf * 0 is NaN
    # in the backward pass even when the forward value is masked out.
    log_ratio = torch.where(keep, logprobs - old_logprobs, torch.zeros_like(logprobs))
    ratio = torch.exp(log_ratio)
    advantages = advantages.to(ratio.dtype)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    if clip_ratio_c is not None:
        per_token = torch.where(advantages < 0, torch.minimum(per_token, -advantages * clip_ratio_c), per_token)
    loss = torch.where(keep, per_token, torch.zeros_like(ratio))
    with torch.no_grad():
        clip_high = keep & (advantages > 0) & (ratio > 1 + eps_high)
        clip_low = keep & (advantages < 0) & (ratio < 1 - eps_low)
    return loss, ratio, clip_high, clip_low


@dataclass(frozen=True)
class PolicyLoss:
    """The loss to backpropagate and its parts (metrics are detached 0-dim tensors)."""

    loss: torch.Tensor
    """policy + kl_coef * kl: call `.backward()` on this."""
    policy: torch.Tensor
    """The aggregated clipped surrogate loss."""
    kl: torch.Tensor | None
    """The aggregated k3 KL to the reference (None when no reference was given)."""
    clip_frac_high: torch.Tensor
    """Share of loss tokens cut by the upper clip."""
    clip_frac_low: torch.Tensor
    """Share of loss tokens cut by the lower clip."""
    ratio_mean: torch.Tensor
    """Mean ratio over loss tokens (1 on the first update after sampling, up to sampler mismatch)."""

    def metrics(self) -> dict[str, float]:
        """Namespaced floats for logging (each `.item()` is a device sync: call once per step)."""
        out = {
            "loss/total": self.loss.item(),
            "loss/policy": self.policy.item(),
            "loss/clip_frac_high": self.clip_frac_high.item(),
            "loss/clip_frac_low": self.clip_frac_low.item(),
            "loss/ratio_mean": self.ratio_mean.item(),
        }
        if self.kl is not None:
            out["loss/kl"] = self.kl.item()
        return out


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    aggregation: Aggregation = "token-mean",
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    denominator: float | torch.Tensor | None = None,
    norm_length: int | None = None,
    clip_ratio_c: float | None = None,
) -> PolicyLoss:
    """The GRPO/DAPO policy loss of one batch.

    Shapes: `logprobs` (B, T) with grad, from the policy being trained; `old_logprobs` (B, T), those of
    the policy that sampled the tokens; `advantages` (B, T) or (B,); `loss_mask` (B, T), 1 on tokens the
    policy sampled; `ref_logprobs` (B, T) of a frozen reference, needed when `kl_coef > 0`. The KL term
    is aggregated like the policy term. See `aggregate` for `aggregation`, `denominator`, `norm_length`,
    and `clipped_surrogate` for `clip_ratio_c` (dual clip).
    """
    if kl_coef < 0:
        raise ConfigError(f"kl_coef must be >= 0, got {kl_coef}")
    if kl_coef > 0 and ref_logprobs is None:
        raise ConfigError(
            "kl_coef > 0 needs ref_logprobs from the reference model (or set kl_coef=0 for KL-free training)"
        )
    per_token, ratio, clip_high, clip_low = clipped_surrogate(
        logprobs, old_logprobs, advantages, loss_mask, eps_low=eps_low, eps_high=eps_high, clip_ratio_c=clip_ratio_c
    )
    policy = aggregate(per_token, loss_mask, aggregation, denominator=denominator, norm_length=norm_length)
    loss, kl = policy, None
    if ref_logprobs is not None:
        _check_bt("ref_logprobs", ref_logprobs, logprobs.shape)
        kl = aggregate(
            k3_kl(logprobs, ref_logprobs, loss_mask),
            loss_mask,
            aggregation,
            denominator=denominator,
            norm_length=norm_length,
        )
        loss = policy + kl_coef * kl
    with torch.no_grad():
        keep = loss_mask.bool()
        tokens = keep.sum().clamp(min=1)
        return PolicyLoss(
            loss=loss,
            policy=policy.detach(),
            kl=None if kl is None else kl.detach(),
            clip_frac_high=clip_high.sum() / tokens,
            clip_frac_low=clip_low.sum() / tokens,
            ratio_mean=torch.where(keep, ratio, torch.zeros_like(ratio)).sum() / tokens,
        )

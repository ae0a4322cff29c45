"""The clipped policy-gradient loss (PPO / GRPO / DAPO): the default registered policy loss, `clipped`.

Per token t of sequence b, with ratio rho = exp(logp - logp_old) and advantage A:

    loss_bt = -min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A)

`eps_high > eps_low` is DAPO's clip-higher: a low-probability token with A > 0 may grow further before its
gradient is cut. Only tokens with `loss_mask == 1` (sampled by the policy) count; prompt and retrieved
text never do. The per-token losses are then aggregated (`agents.core.aggregate`), optionally plus a k3 KL
term (`agents.core.policy_loss_from_tokens`).
"""

from __future__ import annotations

import torch

from agents.core.aggregation import Aggregation, check_bt, token_advantages
from agents.core.policy_loss import LossSettings, PolicyLoss, policy_loss_from_tokens, register_policy_loss
from searchgym.errors import BatchError, ConfigError

__all__ = ["clipped_loss", "clipped_policy_loss", "clipped_surrogate"]


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
    check_bt("old_logprobs", old_logprobs, shape)
    check_bt("loss_mask", loss_mask, shape)
    advantages = token_advantages(advantages, shape)
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


@register_policy_loss("clipped")
def clipped_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    settings: LossSettings,
    *,
    ref_logprobs: torch.Tensor | None = None,
    denominator: float | torch.Tensor | None = None,
) -> PolicyLoss:
    """The GRPO/DAPO policy loss of one batch, with `settings`' clip range, dual clip, aggregation and KL.

    Shapes: `logprobs` (B, T) with grad, from the model being trained; `old_logprobs` (B, T), those of the
    policy that sampled the tokens; `advantages` (B, T) or (B,); `loss_mask` (B, T), 1 on tokens the policy
    sampled; `ref_logprobs` (B, T) of a frozen reference, needed when `settings.kl_coef > 0`. The KL term is
    aggregated like the policy term. See `agents.core.aggregate` for the aggregation, `denominator` and
    `norm_length`, and `clipped_surrogate` for the dual clip.
    """
    per_token, ratio, clip_high, clip_low = clipped_surrogate(
        logprobs, old_logprobs, advantages, loss_mask,
        eps_low=settings.eps_low, eps_high=settings.eps_high, clip_ratio_c=settings.clip_ratio_c,
    )
    return policy_loss_from_tokens(per_token, ratio, clip_high, clip_low, logprobs, loss_mask, settings,
                                   ref_logprobs=ref_logprobs, denominator=denominator)


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
    """`clipped_loss` with its settings given as keywords, for use on tensors outside a learner."""
    settings = LossSettings(eps_low=eps_low, eps_high=eps_high, aggregation=aggregation, kl_coef=kl_coef,
                            clip_ratio_c=clip_ratio_c, norm_length=norm_length)
    return clipped_loss(logprobs, old_logprobs, advantages, loss_mask, settings, ref_logprobs=ref_logprobs,
                        denominator=denominator)

"""The k3 estimator of KL(pi || pi_ref) per token."""

from __future__ import annotations

import torch

from searchgym.errors import BatchError

__all__ = ["k3_kl"]


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Schulman's k3 estimate of KL(pi || pi_ref) at each sampled token: r - 1 - log r, r = pi_ref / pi.

    With tokens sampled from pi it is unbiased and, unlike -log r, never negative.

    Shapes: `logprobs`, `ref_logprobs` and `mask` (B, T) -> (B, T). Tokens where `mask` is 0 are 0, and
    their log-ratio is zeroed before `exp`, so -inf or garbage log-probs at padding cannot leak NaN into
    the gradient.
    """
    if logprobs.shape != ref_logprobs.shape:
        raise BatchError(
            f"logprobs {tuple(logprobs.shape)} and ref_logprobs {tuple(ref_logprobs.shape)} differ in shape"
        )
    log_ratio = ref_logprobs - logprobs
    if mask is not None:
        if mask.shape != logprobs.shape:
            raise BatchError(f"mask {tuple(mask.shape)} must match logprobs {tuple(logprobs.shape)}")
        keep = mask.bool()
        log_ratio = torch.where(keep, log_ratio, torch.zeros_like(log_ratio))
    kl = torch.exp(log_ratio) - log_ratio - 1
    return kl if mask is None else torch.where(keep, kl, torch.zeros_like(kl))

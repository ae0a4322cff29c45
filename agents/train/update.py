"""One policy-gradient update from trajectories and learner targets, with the learner's registered loss."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch

from agents.core import LossSettings, get_policy_loss
from agents.learners.batch import LearnerBatch
from agents.rollout.batch import token_logprobs


def pad_batch(rows: Sequence[Sequence[float] | Sequence[int] | torch.Tensor], pad: float, dtype: torch.dtype) -> torch.Tensor:
    """Right-pad variable-length rows into a (B, T) tensor."""
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), pad, dtype=dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(r, dtype=dtype)
    return out


def loss_rows(trajectories: Sequence, targets: LearnerBatch) -> tuple[list[int], int]:
    """(rows, tokens): the trajectories that enter the loss (included, with at least one policy token) and
    their policy tokens. The aggregation's denominator is `LossSettings.denominator(tokens, len(rows))`."""
    rows = [i for i, keep in enumerate(targets.include) if keep and sum(trajectories[i].loss_mask) > 0]
    return rows, sum(sum(trajectories[i].loss_mask) for i in rows)


@dataclass
class UpdateStats:
    loss: float
    kl: float | None
    clip_frac_high: float
    clip_frac_low: float
    ratio_mean: float
    loss_tokens: int


def policy_gradient_step(
    model: torch.nn.Module,
    trajectories: Sequence,
    targets: LearnerBatch,
    settings: LossSettings,
    *,
    pad_id: int,
    micro_batch: int,
    reference: torch.nn.Module | None = None,
    temperature: float = 1.0,
    denominator: float | None = None,
    backward: Callable[[torch.Tensor], None] | None = None,
    logprobs: Callable[..., torch.Tensor] | None = None,
    dtype: torch.dtype = torch.float32,
) -> UpdateStats:
    """Accumulate the policy loss's gradient over every included trajectory into `model`'s `.grad`.

    The loss is the registered one `settings` names, with those settings (`GRPOConfig.loss_settings`, the
    learner's one reading of its config); its k3 KL is taken to `reference` when `settings.kl_coef > 0`. The
    sampler's logprobs are the old policy (one update per batch of fresh rollouts, as GRPO does), the loss
    mask is the rollout's explicit one, and the denominator of the aggregation is the whole step's, so
    micro-batching gives the same gradient as one big batch. Does not step the optimizer.

    Data parallel: `denominator` is the whole step's over every rank (`settings.denominator` of the summed
    `loss_rows`), so the sum of the ranks' gradients is the single-process one; `backward` replaces
    `loss.backward()` (e.g. an `Accelerator`'s); `logprobs(ids, attention, temperature=..., positions=...)`
    replaces `token_logprobs(model, ...)` (a sharded model's root, `agents.train.fsdp`). The stats are then
    this rank's share: `loss` and `kl` sum over ranks, the clip fractions and the mean ratio are means over
    `loss_tokens`.

    `dtype`: the precision of the forward passes (`agents.precision`; bfloat16: the decoder under autocast,
    the logprobs, the loss and the float32 gradients of the float32 weights as ever), for the policy and
    the reference alike.
    """
    rows, total_tokens = loss_rows(trajectories, targets)
    if not rows:
        return UpdateStats(0.0, None, 0.0, 0.0, 1.0, 0)
    # Micro-batches of similar lengths pad less; the step's gradient is a sum over rows, so the order only
    # moves float rounding.
    rows = sorted(rows, key=lambda i: len(trajectories[i].token_ids))
    if denominator is None:
        denominator = settings.denominator(total_tokens, len(rows))
    loss_fn = get_policy_loss(settings.name)
    with_kl = reference is not None and settings.kl_coef > 0
    device = next(model.parameters()).device
    if logprobs is None:
        logprobs = partial(token_logprobs, model, dtype=dtype)
    sums = {"loss": 0.0, "kl": 0.0, "high": 0.0, "low": 0.0, "ratio": 0.0}
    for start in range(0, len(rows), micro_batch):
        chunk = [trajectories[i] for i in rows[start : start + micro_batch]]
        adv = [targets.advantages[i] for i in rows[start : start + micro_batch]]
        ids = pad_batch([t.token_ids for t in chunk], pad_id, torch.long).to(device)
        attention = pad_batch([[1] * len(t.token_ids) for t in chunk], 0, torch.long).to(device)
        mask = pad_batch([t.loss_mask for t in chunk], 0, torch.float32).to(device)
        old = pad_batch([t.logprobs for t in chunk], 0.0, torch.float32).to(device)
        advantages = pad_batch(adv, 0.0, torch.float32).to(device)
        new = logprobs(ids, attention, temperature=temperature, positions=mask)
        ref = None
        if with_kl:
            with torch.no_grad():
                ref = token_logprobs(reference, ids, attention, temperature=temperature, positions=mask, dtype=dtype)
        out = loss_fn(new, old, advantages, mask, settings, ref_logprobs=ref, denominator=denominator)
        if backward is None:
            out.loss.backward()
        else:
            backward(out.loss)
        tokens = float(mask.sum())
        sums["loss"] += float(out.loss.detach())
        sums["kl"] += float(out.kl) if out.kl is not None else 0.0
        # Clip fractions and the mean ratio are per micro-batch token shares: weight them by tokens.
        sums["high"] += float(out.clip_frac_high) * tokens
        sums["low"] += float(out.clip_frac_low) * tokens
        sums["ratio"] += float(out.ratio_mean) * tokens
    return UpdateStats(
        loss=sums["loss"],
        kl=sums["kl"] if with_kl else None,
        clip_frac_high=sums["high"] / total_tokens,
        clip_frac_low=sums["low"] / total_tokens,
        ratio_mean=sums["ratio"] / total_tokens,
        loss_tokens=total_tokens,
    )

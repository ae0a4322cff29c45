"""Policy losses registered by name, and the one settings object every loss reads.

A policy loss turns the trained model's per-token log-probs into the scalar to backpropagate. Every loss has
one signature,

    loss(logprobs, old_logprobs, advantages, loss_mask, settings, *, ref_logprobs=None, denominator=None)
        -> PolicyLoss

and is registered by name with the `register_policy_loss` decorator (verl's idea, as learners are registered
in `agents.learners.registry`). A learner names its loss (`GRPOConfig.policy_loss`), `GRPOConfig.loss_settings`
reads the `LossSettings` from the learner's config in one place for every model the learner trains (the
policy, COSEARCH's ranker), and `agents.train.update.policy_gradient_step` calls the loss that
`settings.name` names. The clipped PPO / GRPO / DAPO loss (`agents.core.losses.clipped_loss`) is the default,
`clipped`; GSPO's sequence-level loss is registered by its learner module (`agents.learners.gspo`).

>>> import dataclasses
>>> from agents.core.losses import clipped_loss
>>> @register_policy_loss("symmetric-clip")
... def symmetric_clip(logprobs, old_logprobs, advantages, loss_mask, settings, *, ref_logprobs=None, denominator=None):
...     settings = dataclasses.replace(settings, eps_high=settings.eps_low)
...     return clipped_loss(logprobs, old_logprobs, advantages, loss_mask, settings, ref_logprobs=ref_logprobs,
...                         denominator=denominator)
>>> get_policy_loss(LossSettings(name="symmetric-clip").name) is symmetric_clip
True
>>> unregister_policy_loss("symmetric-clip")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from agents.core.aggregation import AGGREGATIONS, Aggregation, aggregate, check_bt
from agents.core.kl import k3_kl
from searchgym.errors import ConfigError

__all__ = [
    "LossSettings",
    "PolicyLoss",
    "PolicyLossFn",
    "compute_policy_loss",
    "get_policy_loss",
    "policy_loss_from_tokens",
    "policy_loss_names",
    "register_policy_loss",
    "unregister_policy_loss",
]


@dataclass(frozen=True)
class LossSettings:
    """What a policy loss reads. `GRPOConfig.loss_settings` builds it from the learner's config, the same way
    for every model the learner trains. A loss that needs a setting of its own subclasses this dataclass, and
    its learner's config overrides `loss_settings` to fill it in."""

    name: str = "clipped"
    """The registered loss (`register_policy_loss`) that these settings are for."""
    eps_low: float = 0.2
    """Lower clip: the ratio is clipped at 1 - eps_low."""
    eps_high: float = 0.28
    """Upper clip: the ratio is clipped at 1 + eps_high (DAPO's clip-higher when > eps_low)."""
    aggregation: Aggregation = "token-mean"
    """How per-token values become one number (`agents.core.aggregate`)."""
    kl_coef: float = 0.0
    """Weight of the k3 KL to the reference model; 0 is KL-free."""
    clip_ratio_c: float | None = None
    """Dual clip (> 1), or None for none."""
    norm_length: int | None = None
    """Dr.GRPO's constant normaliser of `seq-mean-token-sum-norm`: the trained model's generation budget."""

    def __post_init__(self) -> None:
        entry = _LOSSES.get(self.name)
        if entry is None:
            raise ConfigError(f"unknown policy loss {self.name!r}; registered: {', '.join(policy_loss_names())} "
                              "(a learner's module registers its loss when imported: import agents.learners)")
        if not (0 <= self.eps_low < 1 and self.eps_high >= 0):
            raise ConfigError(
                f"need 0 <= eps_low < 1 and eps_high >= 0; got eps_low={self.eps_low}, eps_high={self.eps_high}"
            )
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(f"unknown aggregation {self.aggregation!r}; choose one of {AGGREGATIONS}")
        if self.kl_coef < 0:
            raise ConfigError(f"kl_coef must be >= 0, got {self.kl_coef}")
        if self.clip_ratio_c is not None and not self.clip_ratio_c > 1:
            raise ConfigError(f"clip_ratio_c must be > 1 (or None for no dual clip), got {self.clip_ratio_c}")
        if self.norm_length is not None and self.norm_length < 1:
            raise ConfigError(f"norm_length must be a positive token count (or None), got {self.norm_length}")
        if entry.check is not None:
            entry.check(self)

    def denominator(self, tokens: int, sequences: int) -> int:
        """The aggregation's denominator for a whole step of `sequences` sequences with `tokens` loss tokens:
        the tokens for `token-mean`, the sequences otherwise (see `agents.core.aggregate`)."""
        return tokens if self.aggregation == "token-mean" else sequences


@dataclass(frozen=True)
class PolicyLoss:
    """The loss to backpropagate and its parts (metrics are detached 0-dim tensors)."""

    loss: torch.Tensor
    """policy + kl_coef * kl: call `.backward()` on this."""
    policy: torch.Tensor
    """The aggregated surrogate loss."""
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


def policy_loss_from_tokens(
    per_token: torch.Tensor,
    ratio: torch.Tensor,
    clip_high: torch.Tensor,
    clip_low: torch.Tensor,
    logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    settings: LossSettings,
    *,
    ref_logprobs: torch.Tensor | None = None,
    denominator: float | torch.Tensor | None = None,
) -> PolicyLoss:
    """The `PolicyLoss` of a per-token surrogate: what every registered loss shares once its tokens are scored.

    `per_token` (B, T) is the surrogate loss of each token (0 off the mask), `ratio` (B, T) the importance
    ratio it used, `clip_high` and `clip_low` (B, T) bool the loss tokens whose gradient a clip cut. The
    surrogate is aggregated by `settings.aggregation` over the step's `denominator`; with `ref_logprobs`
    (B, T) the k3 KL to the reference is aggregated the same way and added with weight `settings.kl_coef`.
    """
    if settings.kl_coef > 0 and ref_logprobs is None:
        raise ConfigError(
            "kl_coef > 0 needs ref_logprobs from the reference model (or set kl_coef=0 for KL-free training)"
        )
    agg = {"denominator": denominator, "norm_length": settings.norm_length}
    policy = aggregate(per_token, loss_mask, settings.aggregation, **agg)
    loss, kl = policy, None
    if ref_logprobs is not None:
        check_bt("ref_logprobs", ref_logprobs, logprobs.shape)
        kl = aggregate(k3_kl(logprobs, ref_logprobs, loss_mask), loss_mask, settings.aggregation, **agg)
        loss = policy + settings.kl_coef * kl
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


PolicyLossFn = Callable[..., PolicyLoss]
"""(logprobs, old_logprobs, advantages, loss_mask, settings, *, ref_logprobs=None, denominator=None) ->
`PolicyLoss`. Shapes: `logprobs` (B, T) with grad, from the model being trained; `old_logprobs` (B, T), the
sampler's; `advantages` (B, T) or (B,); `loss_mask` (B, T), 1 on tokens the model sampled; `ref_logprobs`
(B, T) of the frozen reference, given when `settings.kl_coef > 0`; `denominator` the whole step's (see
`LossSettings.denominator`), so that micro-batches add up to the full-batch loss."""


@dataclass(frozen=True)
class _Entry:
    fn: PolicyLossFn
    check: Callable[[LossSettings], None] | None


_LOSSES: dict[str, _Entry] = {}


def register_policy_loss(
    name: str, *, check: Callable[[LossSettings], None] | None = None
) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Decorator: register the decorated function as policy loss `name`.

    `check(settings)`, when given, runs whenever `LossSettings` for this loss are made (so when the learner's
    config is made, before any step) and raises a `ConfigError` for settings the loss cannot honour.
    """

    def decorator(fn: PolicyLossFn) -> PolicyLossFn:
        if name in _LOSSES and _LOSSES[name].fn is not fn:
            raise ConfigError(
                f"a policy loss named {name!r} is already registered ({_LOSSES[name].fn.__module__}); pick another name"
            )
        _LOSSES[name] = _Entry(fn, check)
        return fn

    return decorator


def unregister_policy_loss(name: str) -> None:
    """Remove a loss (for tests and notebooks that register one temporarily)."""
    _LOSSES.pop(name, None)


def get_policy_loss(name: str) -> PolicyLossFn:
    """The loss registered as `name`; a `ConfigError` lists the known names otherwise."""
    try:
        return _LOSSES[name].fn
    except KeyError:
        raise ConfigError(f"unknown policy loss {name!r}; registered: {', '.join(policy_loss_names())}") from None


def policy_loss_names() -> tuple[str, ...]:
    """Registered loss names, in registration order."""
    return tuple(_LOSSES)


def compute_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    settings: LossSettings,
    *,
    ref_logprobs: torch.Tensor | None = None,
    denominator: float | torch.Tensor | None = None,
) -> PolicyLoss:
    """The loss that `settings.name` names, on one batch (see `PolicyLossFn` for the shapes)."""
    return get_policy_loss(settings.name)(
        logprobs, old_logprobs, advantages, loss_mask, settings, ref_logprobs=ref_logprobs, denominator=denominator
    )

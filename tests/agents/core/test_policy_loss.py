"""The policy-loss registry and `LossSettings`: losses are found by name, settings are checked when made."""

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from agents.core import (
    LossSettings,
    clipped_loss,
    clipped_policy_loss,
    compute_policy_loss,
    get_policy_loss,
    policy_loss_names,
    register_policy_loss,
    unregister_policy_loss,
)
from agents.learners.grpo import GRPOConfig
from searchgym.errors import ConfigError
from tests.agents.core.test_losses import batch


def test_the_clipped_loss_is_the_registered_default():
    assert "clipped" in policy_loss_names() and get_policy_loss("clipped") is clipped_loss
    assert LossSettings().name == "clipped" and GRPOConfig().loss_settings().name == "clipped"
    lp, old, adv, mask = batch()
    # The hand-worked batch of test_losses: (-1.2 - 0.7 - 1.1 + 0.8 + 1.2) / 5 = -0.2 with a symmetric clip at 0.2.
    out = compute_policy_loss(lp, old, adv, mask, LossSettings(eps_high=0.2))
    assert out.loss.item() == pytest.approx(-0.2)
    keywords = clipped_policy_loss(lp, old, adv, mask, eps_high=0.2, aggregation="seq-mean")
    by_name = compute_policy_loss(lp, old, adv, mask, LossSettings(eps_high=0.2, aggregation="seq-mean"))
    assert keywords.loss.item() == pytest.approx(by_name.loss.item())


@pytest.fixture
def negated():
    """A loss registered for the test: the clipped loss times -1, refusing a dual clip."""

    def no_dual_clip(settings: LossSettings) -> None:
        if settings.clip_ratio_c is not None:
            raise ConfigError("negated has no dual clip: leave clip_ratio_c at None")

    @register_policy_loss("negated", check=no_dual_clip)
    def negated(logprobs, old_logprobs, advantages, loss_mask, settings, *, ref_logprobs=None, denominator=None):
        out = clipped_loss(logprobs, old_logprobs, advantages, loss_mask, settings, ref_logprobs=ref_logprobs,
                           denominator=denominator)
        return type(out)(-out.loss, -out.policy, out.kl, out.clip_frac_high, out.clip_frac_low, out.ratio_mean)

    yield negated
    unregister_policy_loss("negated")


def test_a_registered_loss_is_called_by_name_and_checks_its_settings(negated):
    lp, old, adv, mask = batch()
    # -(-0.216): the token-mean clipped loss of the hand-worked batch, negated.
    assert compute_policy_loss(lp, old, adv, mask, LossSettings(name="negated")).loss.item() == pytest.approx(0.216)
    with pytest.raises(ConfigError, match="no dual clip"):
        LossSettings(name="negated", clip_ratio_c=3.0)

    @dataclass
    class NegatedConfig(GRPOConfig):
        policy_loss: ClassVar[str] = "negated"

    # The loss's check runs when the learner's config is made, before any step.
    assert NegatedConfig().loss_settings(16).name == "negated"
    with pytest.raises(ConfigError, match="no dual clip"):
        NegatedConfig(clip_ratio_c=3.0)
    with pytest.raises(ConfigError, match="already registered"):
        register_policy_loss("negated")(lambda *args, **kwargs: None)
    unregister_policy_loss("negated")
    with pytest.raises(ConfigError, match="unknown policy loss 'negated'; registered: clipped"):
        get_policy_loss("negated")


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "ppo-ish"}, "unknown policy loss 'ppo-ish'"),
    ({"eps_low": 1.0}, "eps_low"),
    ({"eps_high": -0.1}, "eps_high"),
    ({"aggregation": "sum"}, "aggregation"),
    ({"kl_coef": -0.1}, "kl_coef"),
    ({"clip_ratio_c": 1.0}, "clip_ratio_c"),
    ({"norm_length": 0}, "norm_length"),
])
def test_bad_settings_are_refused_when_made(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LossSettings(**kwargs)


def test_the_step_denominator_follows_the_aggregation():
    # A step of 3 sequences with 10 loss tokens: token-mean divides by the tokens, the others by the sequences.
    assert LossSettings(aggregation="token-mean").denominator(10, 3) == 10
    assert LossSettings(aggregation="seq-mean").denominator(10, 3) == 3
    assert LossSettings(aggregation="seq-mean-token-sum-norm", norm_length=8).denominator(10, 3) == 3


def test_a_kl_weight_needs_reference_logprobs():
    lp, old, adv, mask = batch()
    with pytest.raises(ConfigError, match="ref_logprobs"):
        compute_policy_loss(lp, old, adv, mask, LossSettings(kl_coef=0.1))
    # With a reference equal to the policy the k3 KL is 0 and the loss is the surrogate's.
    out = compute_policy_loss(lp, old, adv, mask, LossSettings(kl_coef=0.1), ref_logprobs=lp.detach().clone())
    assert out.kl.item() == 0.0 and out.loss.item() == pytest.approx(-0.216)
    assert torch.equal(out.policy, out.loss.detach())

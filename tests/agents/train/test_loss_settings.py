"""A learner's loss and its settings reach every model it trains: the policy's update and COSEARCH's ranker's.

The loss settings are read from the learner's config in one place (`GRPOConfig.loss_settings`); the trainer
(for the policy) and the ranker trainer (for the second model) both call the loss the learner names with them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import pytest

from agents.core import LossSettings, clipped_loss, register_policy_loss, unregister_policy_loss
from agents.learners import CoSearchConfig
from agents.learners.registry import get_learner, register_learner, unregister_learner
from agents.train.trainer import Trainer
from tests.agents.train.test_cosearch_ranker import _scripted_ranker_step
from tests.agents.train.test_trainer import tiny_config


@dataclass
class RecordedCoSearchConfig(CoSearchConfig):
    """COSEARCH with a loss that records what it is called with."""

    policy_loss: ClassVar[str] = "recorded-clip"


@pytest.fixture
def recorded():
    """(calls): every call of the `recorded-clip` loss as (settings, batch rows), while COSEARCH's learner is
    registered a second time under `recorded-cosearch` with a config that names that loss."""
    calls: list[tuple[LossSettings, int]] = []

    @register_policy_loss("recorded-clip")
    def recorded_clip(logprobs, old_logprobs, advantages, loss_mask, settings, *, ref_logprobs=None, denominator=None):
        calls.append((settings, logprobs.shape[0]))
        return clipped_loss(logprobs, old_logprobs, advantages, loss_mask, settings, ref_logprobs=ref_logprobs,
                            denominator=denominator)

    cosearch = get_learner("cosearch")
    register_learner("recorded-cosearch", config=RecordedCoSearchConfig, needs=cosearch.needs,
                     second_model=cosearch.second_model)(cosearch.batch)
    yield calls
    unregister_learner("recorded-cosearch")
    unregister_policy_loss("recorded-clip")


def test_a_loss_option_reaches_the_policy_and_the_ranker_update(tmp_path, recorded):
    # Options away from every default, and the Dr.GRPO aggregation, whose norm length is each model's own
    # generation budget: the policy's max_response_tokens (64 in tiny_config), the ranker's ranker_max_tokens.
    learner = RecordedCoSearchConfig(eps_low=0.15, eps_high=0.37, clip_ratio_c=2.5, kl_coef=0.002,
                                     aggregation="seq-mean-token-sum-norm", ranker_max_tokens=40, ranker_cold_start_steps=0)
    trainer = Trainer(tiny_config(tmp_path, learner=learner, env={"top_k": 2}))
    try:
        assert trainer.config.learner_name == "recorded-cosearch"
        trajectories = trainer.rollout_share([0], 0)
        stats, _ = trainer.update(trajectories, trainer.learner.batch(trajectories, learner))
        policy_calls = list(recorded)
        recorded.clear()
        metrics, _ = _scripted_ranker_step(trainer)
        ranker_calls = list(recorded)
    finally:
        trainer.close()
    expected = dict(name="recorded-clip", eps_low=0.15, eps_high=0.37, aggregation="seq-mean-token-sum-norm",
                    kl_coef=0.002, clip_ratio_c=2.5)
    assert stats.loss_tokens > 0 and policy_calls
    assert {settings for settings, _ in policy_calls} == {LossSettings(**expected, norm_length=64)}
    # The ranker's four scripted calls form one group, updated in micro-batches of 2 (tiny_config's micro_batch).
    assert metrics["ranker/groups"] == 1 and sum(rows for _, rows in ranker_calls) == 4
    assert {settings for settings, _ in ranker_calls} == {LossSettings(**expected, norm_length=40)}


def test_loss_settings_are_read_from_the_config_in_one_place():
    config = CoSearchConfig(eps_low=0.1, eps_high=0.3, aggregation="seq-mean", kl_coef=0.0, clip_ratio_c=None)
    assert config.loss_settings(128) == LossSettings(name="clipped", eps_low=0.1, eps_high=0.3, aggregation="seq-mean",
                                                     kl_coef=0.0, clip_ratio_c=None, norm_length=128)
    # The loss a learner names is a class-level choice of its config, not a per-run option.
    assert "policy_loss" not in {f.name for f in fields(CoSearchConfig)}

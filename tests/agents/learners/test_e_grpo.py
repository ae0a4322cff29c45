import pytest
import torch

from agents.core import clipped_policy_loss, group_advantages
from agents.learners.e_grpo import (
    EGRPOConfig,
    entity_aware_rewards,
    entity_rate,
    format_error,
    group_rewards,
    loss_mask,
)
from searchgym.errors import BatchError, ConfigError
from tests.agents.learners.infos import trajectory

NO = [False] * 4


def test_wrong_answers_get_alpha_times_normalized_rate():
    # rates [0.5, 0.25, 1.0, 0.0], max 1.0 -> gamma_hat = rates; correct one gets 1, wrong ones 0.3 * gamma_hat
    rewards = entity_aware_rewards([False, False, True, False], [0.5, 0.25, 1.0, 0.0], format_error=NO, overlong=NO)
    assert rewards == pytest.approx([0.15, 0.075, 1.0, 0.0])


def test_rates_are_normalized_by_the_group_maximum():
    # rates [0.2, 0.4], max 0.4 -> gamma_hat [0.5, 1.0] -> rewards 0.3 * [0.5, 1.0] = [0.15, 0.3]
    assert entity_aware_rewards([False, False], [0.2, 0.4], format_error=NO[:2], overlong=NO[:2]) == pytest.approx(
        [0.15, 0.3]
    )


def test_gamma_max_zero_gives_grpo_rewards():
    # max gamma = 0 -> gamma_hat = 0 for all: wrong answers get 0, the correct one 1
    assert entity_aware_rewards([False, False, True], [0.0, 0.0, 0.0], format_error=NO[:3], overlong=NO[:3]) == [
        0.0,
        0.0,
        1.0,
    ]


def test_alpha_zero_is_grpo_and_format_errors_score_zero():
    assert entity_aware_rewards([True, False], [0.5, 1.0], format_error=NO[:2], overlong=NO[:2], alpha=0.0) == [
        1.0,
        0.0,
    ]
    # a format error scores 0 even when the answer is right
    assert entity_aware_rewards([True, False], [0.5, 1.0], format_error=[True, False], overlong=NO[:2]) == [0.0, 0.3]


def test_overlong_rollout_counts_in_statistics_but_not_in_the_loss():
    # Group of 4: rollout 3 is over-long with the highest rate 1.0 (it still sets the max).
    # gamma_hat = [0.5, 0.25, 0.5, 1.0]; rewards = [1, 0.3*0.25, 0.3*0.5, 0 (over-long)] = [1, 0.075, 0.15, 0]
    rewards = entity_aware_rewards(
        [True, False, False, False], [0.5, 0.25, 0.5, 1.0], format_error=NO, overlong=[False, False, False, True]
    )
    assert rewards == pytest.approx([1.0, 0.075, 0.15, 0.0])
    # Its 0 stays in the group: mean = 1.225 / 4 = 0.30625 (0.408333 without it); squared deviations
    # 0.48128906 + 0.05347656 + 0.02441406 + 0.09378906 = 0.65296875, / 3 -> std 0.466536
    adv = group_advantages(torch.tensor([rewards], dtype=torch.float64), eps=0.0)[0]
    assert adv.tolist() == pytest.approx([1.487022, -0.495674, -0.334915, -0.656433], abs=1e-6)
    # ...but its tokens leave the loss: with ratio 1 (first update), each row's loss is -A per token.
    mask = loss_mask(torch.ones(4, 2), [False, False, False, True], [False] * 4, EGRPOConfig())
    assert mask[3].tolist() == [0.0, 0.0] and mask[:3].sum().item() == 6
    lp = torch.zeros(4, 2, dtype=torch.float64)
    out = clipped_policy_loss(lp, lp, adv, mask)
    # token-mean over 6 tokens: -(2 * (1.487022 - 0.495674 - 0.334915)) / 6 = -0.218811
    assert out.loss.item() == pytest.approx(-(1.487022 - 0.495674 - 0.334915) / 3, abs=1e-6)


def test_format_errors_stay_in_the_loss_unless_configured():
    mask = torch.ones(2, 3)
    assert loss_mask(mask, [False, False], [True, False], EGRPOConfig()).sum().item() == 6
    assert loss_mask(mask, [False, False], [True, False], EGRPOConfig(drop_format_errors=True))[0].sum().item() == 0


def test_group_rewards_from_step_infos():
    right = trajectory(["search", "answer"], [1, None], em=1.0, rate=0.5)
    wrong = trajectory(["search", "answer"], [0, None], em=0.0, rate=1.0)
    malformed = trajectory(["answer"], em=0.0, rate=1.0, format_valid=False)
    out_of_turns = trajectory(["search", "search"], [1, 1], rate=0.5)  # no answer: a format error
    cut = []  # an over-long rollout whose first generation never reached the env
    # gamma = [0.5, 1.0, 1.0, 0.5, 0.0], max 1 -> the wrong, well-formed answer gets 0.3 * 1.0
    rewards = group_rewards([right, wrong, malformed, out_of_turns, cut], [False, False, False, False, True])
    assert rewards == pytest.approx([1.0, 0.3, 0.0, 0.0, 0.0])
    assert format_error(out_of_turns) and format_error(cut) and not format_error(right)


def test_entity_rate_sources():
    assert entity_rate(trajectory(["answer"], rate=0.25)) == 0.25
    no_summary = trajectory(["answer"], rate=0.75)
    no_summary[-1]["episode"]["entity_rate"] = None
    assert entity_rate(no_summary) == 0.75  # falls back to the last step's entities
    assert entity_rate(trajectory(["answer"])) == 0.0  # the record has no gold entities
    assert entity_rate([]) == 0.0


def test_bad_inputs_raise():
    with pytest.raises(BatchError, match="one value per rollout"):
        entity_aware_rewards([True], [0.5, 0.5], format_error=[False], overlong=[False])
    with pytest.raises(BatchError, match="rates"):
        entity_aware_rewards([True], [1.5], format_error=[False], overlong=[False])
    with pytest.raises(ConfigError, match="alpha"):
        EGRPOConfig(alpha=1.5)
    with pytest.raises(BatchError, match="over-long flags"):
        group_rewards([[]], [False, True])

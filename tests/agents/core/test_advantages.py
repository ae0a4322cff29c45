import math

import pytest
import torch

from agents.core import dynamic_sampling_mask, group_advantages, group_stats
from searchgym.errors import BatchError, ConfigError


def test_grpo_advantage_one_correct_of_four():
    # r = [1, 0, 0, 0]: mean 0.25; squared deviations 0.5625 + 3 * 0.0625 = 0.75;
    # unbiased var 0.75 / 3 = 0.25 -> std 0.5; A = (r - 0.25) / 0.5 = [1.5, -0.5, -0.5, -0.5].
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), eps=0.0)
    assert adv[0].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])


def test_grpo_advantage_biased_std():
    # same rewards, population var 0.75 / 4 = 0.1875 -> std sqrt(3)/4; A = 0.75 / (sqrt(3)/4) = sqrt(3),
    # -0.25 / (sqrt(3)/4) = -1/sqrt(3).
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), eps=0.0, unbiased=False)
    s3 = math.sqrt(3)
    assert adv[0].tolist() == pytest.approx([s3, -1 / s3, -1 / s3, -1 / s3])


def test_eps_is_added_to_the_std():
    # r = [1, 0]: mean 0.5, unbiased std sqrt(0.5) = 0.70711; eps = 1 -> A = 0.5 / 1.70711 = 0.29289.
    adv = group_advantages(torch.tensor([[1.0, 0.0]]), eps=1.0)
    assert adv[0].tolist() == pytest.approx([0.5 / (math.sqrt(0.5) + 1), -0.5 / (math.sqrt(0.5) + 1)])
    assert adv[0, 0].item() == pytest.approx(0.29289, abs=1e-5)


@pytest.mark.parametrize("eps", [1e-6, 0.0])
def test_equal_rewards_give_zero_not_nan(eps):
    adv = group_advantages(torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]), eps=eps)
    assert adv.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def test_dr_grpo_is_mean_only():
    # r - mean: [0.75, -0.25, -0.25, -0.25]; second group [2, 4] -> mean 3 -> [-1, 1] (no std division).
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0], [2.0, 4.0, 3.0, 3.0]]), scale="none")
    assert adv[0].tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])
    assert adv[1].tolist() == pytest.approx([-1.0, 1.0, 0.0, 0.0])


def test_flat_layout_with_uneven_groups():
    # group 7: [1, 0.5] -> mean 0.75, unbiased std sqrt(2 * 0.0625 / 1) = 0.35355 -> A = +-0.70711.
    # group 3: [0, 1, 0] -> mean 1/3, ss = 1/9 + 4/9 + 1/9 = 2/3, var = (2/3) / 2 = 1/3, std 0.57735
    #   -> A = -1/3 / 0.57735 = -0.57735, 2/3 / 0.57735 = 1.15470.
    rewards = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0])
    ids = torch.tensor([7, 3, 7, 3, 3])
    adv = group_advantages(rewards, ids, eps=0.0)
    assert adv.tolist() == pytest.approx([0.70711, -0.57735, -0.70711, 1.15470, -0.57735], abs=1e-5)
    mean, std = group_stats(rewards, ids)
    assert mean.tolist() == pytest.approx([0.75, 1 / 3, 0.75, 1 / 3, 1 / 3])
    assert std.tolist() == pytest.approx([0.35355, 0.57735, 0.35355, 0.57735, 0.57735], abs=1e-5)


def test_flat_and_grouped_layouts_agree():
    grouped = torch.tensor([[1.0, 0.0, 0.3], [0.2, 0.9, 0.9]])
    ids = torch.tensor([0, 0, 0, 1, 1, 1])
    assert torch.allclose(group_advantages(grouped).reshape(-1), group_advantages(grouped.reshape(-1), ids))


def test_group_of_one_has_zero_advantage():
    adv = group_advantages(torch.tensor([0.7, 1.0, 0.0]), torch.tensor([5, 6, 6]))
    assert adv[0].item() == 0.0


def test_integer_rewards_are_accepted():
    adv = group_advantages(torch.tensor([[1, 0]]), scale="none")
    assert adv.dtype.is_floating_point and adv.tolist() == [[0.5, -0.5]]


def test_bad_layout_and_options_raise():
    with pytest.raises(BatchError, match="num_groups, G"):
        group_advantages(torch.tensor([1.0, 0.0]))
    with pytest.raises(BatchError, match="both be"):
        group_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0, 1]))
    with pytest.raises(ConfigError, match="scale"):
        group_advantages(torch.tensor([[1.0, 0.0]]), scale="batch")  # type: ignore[arg-type]


def test_dynamic_sampling_drops_equal_groups():
    rewards = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.4]])
    assert dynamic_sampling_mask(rewards).tolist() == [True, False, False, True]
    # with atol 0.1 the last group's spread (0.1) counts as equal
    assert dynamic_sampling_mask(rewards, atol=0.1).tolist() == [True, False, False, False]


def test_dynamic_sampling_flat_marks_each_element():
    # groups: 0 -> [1, 0] kept; 1 -> [-2, -2] dropped (negative rewards too); 2 -> [3] alone, dropped
    rewards = torch.tensor([1.0, -2.0, 0.0, -2.0, 3.0])
    ids = torch.tensor([0, 1, 0, 1, 2])
    assert dynamic_sampling_mask(rewards, ids).tolist() == [True, False, True, False, False]

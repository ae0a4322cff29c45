import math

import pytest

from agents.learners.cw_grpo import (
    CWGRPOConfig,
    contribution_weights,
    round_advantages,
    round_contributions,
    token_advantages,
    trajectory_round_advantages,
)
from searchgym.errors import BatchError, ConfigError
from tests.agents.learners.infos import labels, trajectory

INF = math.inf


def test_alpha_inf_no_contributing_round_gives_zero_to_search_rounds():
    # c_t = p_t / sum(p) with sum(p) = 0 -> all zero; the answer round keeps A_i = 1.2
    assert round_advantages(1.2, [0, 0, 0], alpha=INF) == [0.0, 0.0, 0.0, 1.2]


def test_alpha_inf_moves_advantage_to_contributing_rounds():
    # p = [1, 0, 1]: c = [1/2, 0, 1/2], T - 1 = 3 -> A_t = 1.2 * c_t * 3 = [1.8, 0, 1.8]; answer keeps 1.2
    advs = round_advantages(1.2, [1, 0, 1], alpha=INF)
    assert advs == pytest.approx([1.8, 0.0, 1.8, 1.2])
    assert sum(advs[:3]) / 3 == pytest.approx(1.2)  # mean over search rounds == A_i


def test_finite_alpha_softmax_by_hand():
    # alpha = 1, p = [1, 0]: softmax(1, 0) = [e/(e+1), 1/(e+1)] = [0.731059, 0.268941]
    # A_t = 0.6 * c_t * 2 = [0.877270, 0.322730]; mean = 0.6
    e = math.e
    assert contribution_weights([1, 0], 0.6, alpha=1.0) == pytest.approx([e / (e + 1), 1 / (e + 1)])
    advs = round_advantages(0.6, [1, 0], alpha=1.0)
    assert advs == pytest.approx([0.877270, 0.322730, 0.6], abs=1e-6)
    assert (advs[0] + advs[1]) / 2 == pytest.approx(0.6)


def test_finite_alpha_three_rounds():
    # alpha = 2, p = [1, 0, 0]: weights e^2/(e^2+2) = 7.389056/9.389056 = 0.786986 and 1/9.389056 = 0.106507
    # A = 1, T - 1 = 3 -> [2.360958, 0.319521, 0.319521], answer 1; mean over search rounds 1
    advs = round_advantages(1.0, [1, 0, 0], alpha=2.0)
    assert advs == pytest.approx([2.360958, 0.319521, 0.319521, 1.0], abs=1e-6)
    assert sum(advs[:3]) / 3 == pytest.approx(1.0)


def test_finite_alpha_no_contribution_is_uniform():
    # softmax of all zeros is uniform: every search round gets A_i, unlike alpha = inf
    assert round_advantages(0.5, [0, 0], alpha=3.0) == pytest.approx([0.5, 0.5, 0.5])


def test_alpha_ten_counts_as_infinite():
    assert contribution_weights([1, 0], 1.0, alpha=10.0) == [1.0, 0.0]
    # just under the threshold it is still a softmax: e^9.99 / (e^9.99 + 1) = 0.9999542
    assert contribution_weights([1, 0], 1.0, alpha=9.99)[0] == pytest.approx(1 / (1 + math.exp(-9.99)))
    assert contribution_weights([1, 0], 1.0, alpha=9.99)[1] > 0


def test_negative_advantage_is_uniform():
    # A_i < 0: c_t = 1/(T-1) whatever p is; A_t = A_i * (1/4) * 4 = A_i for every search round
    assert contribution_weights([1, 0, 1, 1], -0.9, alpha=INF) == [0.25] * 4
    assert round_advantages(-0.9, [1, 0, 1, 1], alpha=INF) == pytest.approx([-0.9] * 5)


def test_alpha_zero_is_grpo():
    assert round_advantages(0.7, [1, 0, 0], alpha=0.0) == pytest.approx([0.7] * 4)


def test_no_search_rounds_and_out_of_turns():
    # T - 1 = 0: only the answer round, which keeps A_i
    assert round_advantages(0.7, [], alpha=INF) == [0.7]
    # out of turns: no answer round; every round is a search round and the mean is A_i
    assert round_advantages(-0.5, [0, 1, 0], answered=False) == pytest.approx([-0.5] * 3)
    assert round_advantages(0.4, [1, 0], answered=False, alpha=INF) == pytest.approx([0.8, 0.0])


def test_contributions_from_step_infos():
    # turn 0 search p=1; turn 1 invalid (labels with None values); turn 2 search whose judge failed
    # (p=0, failed); turn 3 answer -> search rounds p = [1, 0, 0], answered
    infos = trajectory(["search", "invalid", "search", "answer"], [1, None, 0, None], em=1.0)
    infos[2]["labels"] = labels(0, failed=True)
    infos[-1]["episode"]["turn_labels"][2] = infos[2]["labels"]
    assert round_contributions(infos) == ([1, 0, 0], True)
    # A = 1, alpha = inf: c = [1, 0, 0], T - 1 = 3 -> [3, 0, 0], answer 1
    assert trajectory_round_advantages(infos, 1.0) == [3.0, 0.0, 0.0, 1.0]


def test_deferred_labels_are_read_from_the_episode_summary():
    # a deferred judge leaves pending placeholders in the steps and fills the summary
    final = [labels(0), labels(1), None]
    infos = trajectory(["search", "search", "answer"], em=1.0, episode_labels=final)
    for info in infos[:2]:
        info["labels"] = labels(None, pending=True)
    assert round_contributions(infos) == ([0, 1], True)
    # without the summary, pending labels count as 0
    del infos[-1]["episode"]
    assert round_contributions(infos) == ([0, 0], True)


def test_token_advantages_broadcast_rounds_to_spans():
    traj_a = trajectory(["search", "answer"], [1, None], em=1.0)  # A = 0.5 -> [0.5 * 1 * 1, 0.5]
    traj_b = trajectory(["search", "search"], [0, 0])  # out of turns, A = -0.5 -> [-0.5, -0.5]
    out = token_advantages([traj_a, traj_b], [0.5, -0.5], [[(0, 2), (4, 5)], [(1, 2), (3, 6)]], seq_len=6)
    assert out[0].tolist() == [0.5, 0.5, 0.0, 0.0, 0.5, 0.0]
    assert out[1].tolist() == [0.0, -0.5, 0.0, -0.5, -0.5, -0.5]
    # over-long: the env saw one search (p = 1) but the rollout has a second, cut-off round (p = 0);
    # A = 0.3, alpha = inf: c = [1, 0], two search rounds -> [0.6, 0.0]; no answer round
    cut = trajectory(["search"], [1])
    del cut[-1]["episode"]
    out = token_advantages([cut, []], [0.3, -0.2], [[(0, 1), (2, 4)], [(0, 3)]], seq_len=4)
    assert out[0].tolist() == pytest.approx([0.6, 0.0, 0.0, 0.0])
    assert out[1].tolist() == pytest.approx([-0.2, -0.2, -0.2, 0.0])  # nothing reached the env
    with pytest.raises(BatchError, match="outcome advantages"):
        token_advantages([traj_a], [0.5, 0.1], [[(0, 1), (1, 2)]], seq_len=2)


def test_bad_inputs_raise():
    with pytest.raises(BatchError, match="0 or 1"):
        contribution_weights([2, 0], 1.0)
    with pytest.raises(ConfigError, match="alpha"):
        contribution_weights([1, 0], 1.0, alpha=-1.0)
    with pytest.raises(ConfigError, match="alpha"):
        CWGRPOConfig(alpha=-0.5)
    with pytest.raises(BatchError):
        round_contributions([])
    assert CWGRPOConfig().alpha == INF and CWGRPOConfig().eps_high == 0.28

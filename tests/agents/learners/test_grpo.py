import math

import pytest
import torch

from agents.learners.grpo import GRPOConfig, grpo_advantages, outcome_reward
from searchgym.envs import SearchQAEnv
from searchgym.errors import BatchError, ConfigError
from tests.agents.learners.infos import trajectory


def test_outcome_reward_reads_the_episode_summary():
    infos = trajectory(["search", "answer"], [1, None], em=1.0, f1=1.0)
    assert outcome_reward(infos) == 1.0
    assert outcome_reward(trajectory(["answer"], em=0.0, f1=0.4), "f1") == 0.4
    # `answer` is only in the last step's reward parts
    assert outcome_reward(trajectory(["answer"], em=1.0), "answer") == 1.0


def test_outcome_reward_without_summary_and_out_of_turns():
    infos = trajectory(["answer"], em=1.0)
    del infos[-1]["episode"]
    assert outcome_reward(infos) == 1.0
    assert outcome_reward(trajectory(["search", "search"], [0, 1])) == 0.0
    with pytest.raises(BatchError):
        outcome_reward([])
    with pytest.raises(ConfigError, match="reward key"):
        outcome_reward(infos, "bleu")  # type: ignore[arg-type]


def test_outcome_reward_from_a_real_episode(small_records, ten_doc_corpus):
    env = SearchQAEnv(small_records, ten_doc_corpus, retriever="rank_bm25", cache_dir=False, max_turns=2)
    infos = []
    env.reset(options={"question_id": "q1"})
    infos.append(env.step("<think>look</think><search>radioactivity</search>")[4])
    infos.append(env.step("<think>found</think><answer>Henri Becquerel</answer>")[4])
    assert outcome_reward(infos) == 1.0
    env.reset(options={"question_id": "q1"})
    lost = [env.step("<search>radioactivity</search>")[4], env.step("<search>uranium</search>")[4]]
    assert lost[-1]["episode"]["outcome"] == "out_of_turns" and outcome_reward(lost) == 0.0


def test_grpo_advantages_with_dynamic_sampling():
    # group 0: [1, 0] -> mean 0.5, unbiased std sqrt(0.5) -> A = +-0.5 / 0.70711 = +-0.70711
    # group 1: [1, 1] -> all equal: A = 0 and the group is dropped
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    adv, keep = grpo_advantages(rewards, GRPOConfig(eps=0.0, dynamic_sampling=True))
    assert adv[0].tolist() == pytest.approx([1 / math.sqrt(2), -1 / math.sqrt(2)])
    assert adv[1].tolist() == [0.0, 0.0]
    assert keep.tolist() == [True, False]
    _, keep_all = grpo_advantages(rewards, GRPOConfig())
    assert keep_all.tolist() == [True, True]
    adv_dr, _ = grpo_advantages(rewards, GRPOConfig(scale="none"))
    assert adv_dr[0].tolist() == [0.5, -0.5]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"reward_key": "bleu"}, "reward_key"),
        ({"scale": "batch"}, "scale"),
        ({"eps_low": 1.0}, "eps_low"),
        ({"eps_high": -0.1}, "eps_high"),
        ({"aggregation": "sum"}, "aggregation"),
        ({"kl_coef": -1.0}, "kl_coef"),
        ({"eps": math.nan}, "eps"),
    ],
)
def test_config_validation(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        GRPOConfig(**kwargs)


def test_rollout_trajectories_provide_what_the_learners_protocol_reads():
    from agents.learners.batch import Trajectory as LearnerTrajectory
    from agents.rollout.trajectory import Trajectory

    members = [name for name, value in vars(LearnerTrajectory).items() if isinstance(value, property)]
    assert {"group", "token_ids", "step_infos", "rounds", "finish_reason", "gold_answers"} <= set(members)
    provided = set(Trajectory.__dataclass_fields__) | {n for n, v in vars(Trajectory).items() if isinstance(v, property)}
    assert set(members) <= provided

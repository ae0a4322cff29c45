"""A fifth learner, defined and registered in this file alone, trains with the unchanged trainer and CLI.

`docs/add-a-learner.md` walks through this file. The learner is GRPO with a cost per search: the reward is
the outcome (EM) minus `search_cost` times the number of searches, a common way to make an agent search less.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
import torch

from agents.learners.batch import LearnerBatch, Trajectory
from agents.learners.grpo import GRPOConfig, grpo_advantages, outcome_reward
from agents.learners.registry import EnvNeeds, get_learner, learner_names, register_learner, unregister_learner
from searchgym.errors import ConfigError
from tests.agents.train.test_trainer import tiny_config

# -- 1. the config: GRPO's options plus this learner's own, each documented once ----------------------------


@dataclass
class SearchCostConfig(GRPOConfig):
    """GRPO's options plus the price of a search."""

    search_cost: float = 0.1
    """Subtracted from the outcome reward once per search the trajectory made."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.search_cost >= 0 and math.isfinite(self.search_cost)):
            raise ConfigError(f"search_cost must be a finite number >= 0, got {self.search_cost}")


# -- 2. the rule: a pure function of the step infos ---------------------------------------------------------


def searches(infos) -> int:
    """Searches in one trajectory, from the env's step info (never re-derived from text)."""
    return sum(info["action"] == "search" for info in infos)


def search_cost_rewards(trajectories: Sequence[Trajectory], config: SearchCostConfig) -> list[float]:
    return [(outcome_reward(t.step_infos, config.reward_key) if t.step_infos else 0.0) - config.search_cost * searches(t.step_infos)
            for t in trajectories]


# -- 3. the batch function, registered under a name with its config and what it needs from the env ----------


def register() -> None:
    @register_learner("search-cost", config=SearchCostConfig, needs=EnvNeeds())
    def batch_advantages(trajectories: Sequence[Trajectory], config: SearchCostConfig) -> LearnerBatch:
        """GRPO on the outcome reward minus a cost per search."""
        rewards = torch.tensor(search_cost_rewards(trajectories, config), dtype=torch.float64)
        advantages, keep = grpo_advantages(rewards, config, torch.tensor([t.group for t in trajectories]))
        return LearnerBatch(
            advantages=[torch.full((len(t.token_ids),), float(a)) for t, a in zip(trajectories, advantages.tolist())],
            include=[bool(k) for k in keep.tolist()],
            rewards=rewards.tolist(),
            metrics={"search_cost/searches": sum(searches(t.step_infos) for t in trajectories) / max(len(trajectories), 1)},
        )


@pytest.fixture
def search_cost():
    register()
    yield get_learner("search-cost")
    unregister_learner("search-cost")


# -- 4. the tests ---------------------------------------------------------------------------------------------


def test_the_rule_on_literal_infos():
    class T:
        def __init__(self, actions, em):
            self.step_infos = [{"action": a} for a in actions]
            self.step_infos[-1]["episode"] = {"em": em}

    # 1 - 0.1 * 2 = 0.8; 0 - 0.1 * 1 = -0.1; 1 - 0.1 * 0 = 1.0
    rewards = search_cost_rewards([T(["search", "search", "answer"], 1.0), T(["search", "answer"], 0.0), T(["answer"], 1.0)],
                                  SearchCostConfig(search_cost=0.1))
    assert rewards == pytest.approx([0.8, -0.1, 1.0])


def test_a_learner_registered_here_trains_one_step(tmp_path, search_cost):
    from agents.train.trainer import Trainer

    assert "search-cost" in learner_names() and search_cost.config is SearchCostConfig
    trainer = Trainer(tiny_config(tmp_path, learner=SearchCostConfig(search_cost=0.5), steps=1))
    history = trainer.run()
    trainer.close()
    assert trainer.config.learner_name == "search-cost"
    (metrics,) = history
    assert metrics["step"] == 1 and math.isfinite(metrics["loss/policy"]) and metrics["rollout/sampled_tokens"] > 0
    assert metrics["search_cost/searches"] >= 0
    # Rewards can be negative only through the search cost: EM is 0 or 1.
    assert metrics["rollout/reward"] >= -0.5 * 2


def test_the_cli_reaches_its_options(search_cost):
    from agents.cli import build_parser
    from agents.cli.train import config_from_args

    args = build_parser().parse_args(["train", "--learner", "search-cost", "--learner.search-cost", "0.25", "--learner.kl-coef", "0.01"])
    config = config_from_args(args)
    assert config.learner == SearchCostConfig(search_cost=0.25, kl_coef=0.01)
    with pytest.raises(SystemExit, match="no option --learner.search-cost"):
        config_from_args(build_parser().parse_args(["train", "--learner", "grpo", "--learner.search-cost", "0.25"]))


def test_a_name_or_config_class_is_registered_once(search_cost):
    with pytest.raises(ConfigError, match="already registered"):
        register_learner("search-cost", config=SearchCostConfig)(lambda trajectories, config: None)
    with pytest.raises(ConfigError, match="reuses SearchCostConfig"):
        register_learner("other-name", config=SearchCostConfig)(lambda trajectories, config: None)
    with pytest.raises(ConfigError, match="GRPOConfig subclass"):
        register_learner("no-config", config=dict)

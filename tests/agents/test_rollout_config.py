"""One `RolloutConfig` for the rollout engine and for training runs, each with its own defaults."""

from dataclasses import replace

import pytest

import agents.rollout.engine
import agents.train.config
from agents.rollout import RolloutConfig
from agents.train import TrainConfig
from agents.train.config import OptimConfig, training_rollout
from searchgym.errors import ConfigError


def test_one_class_serves_the_engine_and_training():
    assert agents.train.config.RolloutConfig is RolloutConfig is agents.rollout.engine.RolloutConfig
    assert isinstance(TrainConfig().rollout, RolloutConfig)


def test_the_engine_and_a_training_run_keep_their_own_defaults():
    engine = RolloutConfig()
    assert (engine.group_size, engine.max_turn_tokens, engine.max_response_tokens, engine.temperature) == (1, 512, 4096, 1.0)
    train = TrainConfig().rollout
    assert (train.group_size, train.max_turn_tokens, train.max_response_tokens, train.temperature) == (4, 48, 384, 1.0)
    assert train == training_rollout() == replace(engine, group_size=4, max_turn_tokens=48, max_response_tokens=384)
    assert training_rollout(group_size=8) == replace(train, group_size=8)


def test_a_training_run_refuses_what_its_update_cannot_take():
    cases = [({"group_size": 1}, "group_size must be >= 2"), ({"temperature": 0.0}, "temperature must be > 0"),
             ({"top_p": 0.9}, "whole distribution"), ({"top_k": 20}, "whole distribution"), ({"seed": 3}, "TrainConfig.seed")]
    for changes, message in cases:
        RolloutConfig(**changes)  # fine for the engine (greedy evaluation, one sample, truncated sampling)
        with pytest.raises(ConfigError, match=message):
            TrainConfig(rollout=training_rollout(**changes))
    with pytest.raises(ConfigError, match="cold start"):
        TrainConfig(rollout=training_rollout(system_prompt="Be brief."), optim=OptimConfig(cold_start_steps=1))
    assert TrainConfig(rollout=training_rollout(system_prompt="Be brief.")).rollout.system_prompt == "Be brief."


def test_list_values_from_the_command_line_become_tuples():
    config = RolloutConfig(stop=["</a>", "</b>"], backend="sglang", sglang_urls=["http://a:1"])
    assert config.stop == ("</a>", "</b>") and config.sglang_urls == ("http://a:1",)
    hash(config)  # frozen and hashable: the engine replaces it, never edits it

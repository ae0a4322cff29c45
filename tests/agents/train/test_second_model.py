"""A learner's second model is a `SecondModel` subclass: every member the trainer uses is declared there, and
`cold_start` and `gathers_env_calls` have defaults that a subclass inherits or overrides."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from agents.learners.cosearch_ranker import RankerTrainer
from agents.learners.grpo import GRPOConfig, batch_advantages
from agents.learners.registry import SecondModel, register_learner, unregister_learner
from agents.train.trainer import Trainer
from searchgym.errors import ConfigError
from tests.agents.train.test_trainer import tiny_config


class StepCounter(SecondModel):
    """A second model with no weights that counts its steps: only the abstract members are written."""

    def __init__(self, ctx):
        self.models, self.optimizers, self.steps = {}, {}, 0

    def env_options(self):
        return {}

    def begin_step(self):
        pass

    def train_step(self, trajectories, env):
        self.steps += 1
        return {"counter/steps": float(self.steps), "counter/trajectories": float(len(trajectories))}

    def mark_restored(self):
        pass


@dataclass
class CounterConfig(GRPOConfig):
    """GRPO with a step counter as its second model."""


@dataclass
class NotDeclaredConfig(GRPOConfig):
    """GRPO whose second model does not subclass SecondModel."""


@pytest.fixture
def counter():
    register_learner("counter", config=CounterConfig, second_model=StepCounter)(batch_advantages)
    yield
    unregister_learner("counter")


def test_the_defaults_are_declared_on_the_base_class():
    model = StepCounter(None)
    assert model.cold_start(env=None) == {} and model.gathers_env_calls is False
    with pytest.raises(TypeError, match="train_step"):
        type("NoTrainStep", (SecondModel,), {"env_options": lambda self: {}, "begin_step": lambda self: None,
                                              "mark_restored": lambda self: None})()
    # COSEARCH's ranker declares both: it gathers a turn's ranker calls and has a cold start of its own.
    assert issubclass(RankerTrainer, SecondModel) and RankerTrainer.gathers_env_calls is True
    assert RankerTrainer.cold_start is not SecondModel.cold_start


def test_the_trainer_calls_the_declared_members(tmp_path, counter):
    trainer = Trainer(tiny_config(tmp_path, learner=CounterConfig(), steps=1))
    history = trainer.run()
    trainer.close()
    assert isinstance(trainer.second_model, StepCounter) and not trainer.engine.config.gather_env_calls
    # tiny_config: 2 questions x 2 rollouts.
    assert history[0]["counter/steps"] == 1.0 and history[0]["counter/trajectories"] == 4.0
    # The inherited cold start trains nothing and logs nothing, so there is no step-0 line.
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1]


def test_a_second_model_that_does_not_subclass_is_refused(tmp_path):
    class Loose:
        models, optimizers = {}, {}

    register_learner("not-declared", config=NotDeclaredConfig, second_model=lambda ctx: Loose())(batch_advantages)
    try:
        with pytest.raises(ConfigError, match="SecondModel subclass"):
            Trainer(tiny_config(tmp_path, learner=NotDeclaredConfig(), steps=1))
    finally:
        unregister_learner("not-declared")

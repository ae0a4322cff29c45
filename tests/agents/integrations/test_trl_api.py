"""The parts of TRL's API that `agents.integrations.trl` relies on, checked by name: when a TRL release
moves one, this fails at once and says which, instead of a rollout failing deep inside a training run.

pyproject's `trl` extra pins the major version these checks were written for (`trl>=1.0,<2`)."""

from __future__ import annotations

import inspect
import re

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed (pip install 'searchgym[agents,trl]')")

TESTED_MAJOR = 1

TRAINER_ARGUMENTS = ("model", "reward_funcs", "args", "train_dataset", "processing_class", "callbacks", "rollout_func")
"""What `make_grpo_trainer` passes to `GRPOTrainer(...)`."""

CONFIG_FIELDS = ("max_completion_length", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "use_vllm",
                 "num_generations", "num_generations_eval", "mask_truncated_completions", "seed")
"""The `GRPOConfig` fields the rollout reads or checks."""

TRAINER_ATTRIBUTES = ("max_completion_length", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                      "use_vllm", "num_generations", "num_generations_eval", "rollout_func")
"""The trainer attributes `SearchQARollout` reads (set in `GRPOTrainer.__init__`)."""


def test_installed_trl_is_the_major_version_the_integration_was_written_for():
    major = int(trl.__version__.split(".")[0])
    assert major == TESTED_MAJOR, (
        f"TRL {trl.__version__} is installed; agents.integrations.trl was written and tested for TRL {TESTED_MAJOR}.x "
        "(pyproject: trl>=1.0,<2). Re-check the rollout_func contract below before widening the bound."
    )


def test_grpo_trainer_takes_the_arguments_we_pass():
    params = inspect.signature(trl.GRPOTrainer.__init__).parameters
    missing = [name for name in TRAINER_ARGUMENTS if name not in params]
    assert not missing, f"GRPOTrainer.__init__ no longer takes {missing}"


def test_grpo_config_has_the_fields_we_read():
    fields = {f for f in trl.GRPOConfig.__dataclass_fields__}
    missing = [name for name in CONFIG_FIELDS if name not in fields]
    assert not missing, f"GRPOConfig no longer has {missing}"


def test_grpo_trainer_sets_the_attributes_the_rollout_reads():
    source = inspect.getsource(trl.GRPOTrainer.__init__)
    missing = [name for name in TRAINER_ATTRIBUTES if not re.search(rf"self\.{name}\s*=", source)]
    assert not missing, f"GRPOTrainer.__init__ no longer sets self.{missing}"


def test_the_rollout_func_contract_is_the_one_we_fill():
    """TRL requires prompt_ids, completion_ids and logprobs from a rollout_func, takes `env_mask` as the
    mask of tokens the policy did not sample, and hands every other key to the reward functions (our
    `searchgym_trajectory`)."""
    from trl.trainer import grpo_trainer

    source = inspect.getsource(grpo_trainer)
    assert 'required_keys = {"prompt_ids", "completion_ids", "logprobs"}' in source, "rollout_func's required keys moved"
    assert 'extra_fields.pop("env_mask"' in source, "rollout_func's env_mask is no longer read"
    assert "self.rollout_func(prompts, self)" in source, "rollout_func is no longer called as (prompts, trainer)"
    assert re.search(r"for key, values in extra_fields\.items\(\)", source), (
        "rollout_func's extra fields no longer reach the reward functions")

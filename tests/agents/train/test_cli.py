"""`python -m agents train`: flags generated from the nested config, every field documented in `--help`."""

import dataclasses
import typing

import pytest

from agents.cli import build_parser
from agents.cli.dataclass_args import field_docs
from agents.cli.train import config_from_args
from agents.learners import learner_names
from agents.learners.registry import get_learner
from agents.train.config import TrainConfig


def _leaves(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _leaves(hints[f.name], f"{prefix}{f.name}.")
        elif f.name != "learner":
            yield cls, prefix + f.name, f.name


def test_every_option_has_a_docstring_and_a_flag_in_help():
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    options = list(_leaves(TrainConfig)) + [(get_learner(n).config, f"learner.{f.name}", f.name)
                                            for n in learner_names() for f in dataclasses.fields(get_learner(n).config)]
    for cls, dotted, name in options:
        doc = field_docs(cls).get(name, "")
        assert doc, f"{cls.__name__}.{name} has no docstring"
        assert "--" + dotted.replace("_", "-") in help_text, dotted
        assert " ".join(doc.split()[:6]) in help_text, f"{dotted}: its docstring is not in --help"


def test_nested_flags_reach_every_section():
    args = build_parser().parse_args([
        "train", "--learner", "e-grpo", "--learner.alpha", "0.5", "--learner.entity-match", "normalized", "--env.hops", "1", "2",
        "--env.options", '{"template": "Q: {question}"}', "--env.judge", "gold", "--rollout.group-size", "3", "--optim.lr", "1e-5",
        "--no-resume", "--steps", "3",
    ])
    config = config_from_args(args)
    assert (config.learner_name, config.learner.alpha, config.learner.entity_match) == ("e-grpo", 0.5, "normalized")
    assert config.env.hops == (1, 2) and config.env.options == {"template": "Q: {question}"}
    assert (config.rollout.group_size, config.optim.lr, config.resume, config.steps) == (3, 1e-5, False, 3)


FLAT_FLAGS = {
    "--hops": ["--env.hops"], "--num-entities": ["--env.num-entities"], "--max-turns": ["--env.max-turns"], "--judge": ["--env.judge"],
    "--env-id": ["--env.id"], "--env-options": ["--env.options"], "--top-k": ["--env.top-k", "--rollout.top-k"],
    "--group-size": ["--rollout.group-size"], "--temperature": ["--rollout.temperature"], "--rollout-backend": ["--rollout.backend"],
    "--sglang-urls": ["--rollout.sglang-urls"], "--no-reuse-kv": ["--no-rollout.reuse-kv"], "--lr": ["--optim.lr"],
    "--micro-batch": ["--optim.micro-batch"], "--lora": ["--optim.lora"], "--cold-start-steps": ["--optim.cold-start-steps"],
    "--kl-coef": ["--learner.kl-coef"], "--eps-high": ["--learner.eps-high"], "--alpha": ["--learner.alpha"],
}
"""Flags of the earlier flat layout, and the nested flags the error names for each (the flat `top_k` was the
env's; `RolloutConfig` has a sampling `top_k` too, so both are named)."""


@pytest.mark.parametrize("flag", list(FLAT_FLAGS))
def test_a_flat_flag_is_an_error_naming_its_nested_flag(flag, capsys):
    value = [] if flag in ("--lora", "--no-reuse-kv") else ["1"]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["train", "--learner", "cw-grpo", flag, *value])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"unrecognized arguments: {' '.join([flag, *value])}" in error
    assert f"{flag} is {' or '.join(FLAT_FLAGS[flag])}" in error


def test_an_unknown_flag_without_a_nested_namesake_is_plainly_unrecognized(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--no-such-option", "1"])
    error = capsys.readouterr().err
    assert "unrecognized arguments: --no-such-option 1" in error and "nesting" not in error


def test_bad_values_are_refused():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--env.options", "[1, 2]"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--learner", "ppo"])


def test_rollout_flags_start_from_the_training_defaults():
    from agents.train.config import training_rollout

    assert config_from_args(build_parser().parse_args(["train"])).rollout == training_rollout()
    config = config_from_args(build_parser().parse_args(["train", "--rollout.group-size", "8", "--rollout.max-obs-tokens", "100",
                                                         "--rollout.stop", "</search>", "</answer>", "--rollout.env-workers", "2"]))
    assert config.rollout == training_rollout(group_size=8, max_obs_tokens=100, stop=("</search>", "</answer>"), env_workers=2)
    assert (config.rollout.max_turn_tokens, config.rollout.max_response_tokens) == (48, 384)


def test_help_shows_the_training_defaults_of_rollout_flags():
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    assert "G: samples per question (the GRPO group). (default: 4)" in help_text
    assert "Tokens the policy may write in one turn. (default: 48)" in help_text


def test_sampling_a_training_run_cannot_take_is_refused():
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match="whole distribution"):
        config_from_args(build_parser().parse_args(["train", "--rollout.top-p", "0.9"]))

"""Dr.GRPO: mean-only advantages and the constant-length normaliser, by hand, in the trainer and via the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch

from agents.core import compute_policy_loss
from agents.learners.batch import LearnerBatch
from agents.learners.dr_grpo import DrGRPOConfig, batch_advantages
from agents.learners.grpo import GRPOConfig
from agents.learners.grpo import batch_advantages as grpo_batch_advantages
from agents.learners.registry import get_learner
from tests.agents.learners.infos import trajectory


class T:
    def __init__(self, group, em, length=3):
        self.group, self.step_infos, self.token_ids = group, trajectory(["search", "answer"], em=em), [1] * length


def test_advantages_are_mean_only():
    trajectories = [T(0, 1.0), T(0, 0.0), T(0, 0.0)]
    # rewards [1, 0, 0], mean 1/3: A = [2/3, -1/3, -1/3]. GRPO divides by the sample std 0.57735:
    # [1.1547, -0.57735, -0.57735].
    got = batch_advantages(trajectories, DrGRPOConfig())
    assert [a[0].item() for a in got.advantages] == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    grpo = grpo_batch_advantages(trajectories, GRPOConfig())
    assert [a[0].item() for a in grpo.advantages] == pytest.approx([1.1547, -0.57735, -0.57735], abs=1e-4)
    assert got.rewards == [1.0, 0.0, 0.0] and got.include == [True] * 3


def test_the_constant_normaliser_weighs_every_token_alike():
    # Two right answers (A = +1) of 1 and 3 tokens, on-policy (ratio 1, no clip binds), token budget 4.
    # Dr.GRPO: each sequence's token sum over 4, mean over the 2 sequences: -(1 + 3) / 4 / 2 = -0.5, and every
    # token's gradient is -1 / 4 / 2 = -0.125. GRPO's seq-mean: -(1/1 + 3/3) / 2 = -1, but the short answer's
    # token gets -1 / 1 / 2 = -0.5 and each long answer's token -1 / 3 / 2 = -0.1667.
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    adv = torch.tensor([1.0, 1.0], dtype=torch.float64)
    lp = torch.full((2, 3), -1.0, dtype=torch.float64, requires_grad=True)
    out = compute_policy_loss(lp, lp.detach().clone(), adv, mask, DrGRPOConfig().loss_settings(4))
    assert out.loss.item() == pytest.approx(-0.5)
    out.loss.backward()
    assert (lp.grad * mask).reshape(-1).tolist() == pytest.approx([-0.125, 0.0, 0.0, -0.125, -0.125, -0.125])
    lp2 = lp.detach().clone().requires_grad_(True)
    grpo = compute_policy_loss(lp2, lp2.detach().clone(), adv, mask, GRPOConfig(aggregation="seq-mean").loss_settings())
    assert grpo.loss.item() == pytest.approx(-1.0)
    grpo.loss.backward()
    assert (lp2.grad * mask).reshape(-1).tolist() == pytest.approx([-0.5, 0.0, 0.0, -1 / 6, -1 / 6, -1 / 6])


def test_config_defaults():
    config = DrGRPOConfig()
    assert (config.scale, config.aggregation) == ("none", "seq-mean-token-sum-norm")
    assert config.loss_settings(64).norm_length == 64 and config.loss_settings(64).name == "clipped"
    assert get_learner("dr-grpo").config is DrGRPOConfig


def test_the_trainer_normalises_by_the_rollouts_token_budget(tmp_path):
    """The policy's update divides each sequence's token sum by `max_response_tokens` (64 in tiny_config)."""
    from agents.train.trainer import Trainer
    from tests.agents.train.test_trainer import tiny_config

    trainer = Trainer(tiny_config(tmp_path, learner=DrGRPOConfig(), steps=1))
    try:
        trajectories = trainer.rollout_share([0, 1], 0)
        # Advantages chosen here (a random model's rewards are all 0): on-policy the ratio is 1 up to the
        # sampler's float rounding, so each token's loss is -A and sequence i contributes -A_i * n_i / 64.
        chosen = [1.0, -0.5, 0.25, 2.0]
        targets = LearnerBatch(advantages=[torch.full((len(t.token_ids),), a) for t, a in zip(trajectories, chosen)],
                               include=[True] * 4, rewards=[0.0] * 4)
        stats, _ = trainer.update(trajectories, targets)
    finally:
        trainer.close()
    tokens = [sum(t.loss_mask) for t in trajectories]
    assert all(n > 0 for n in tokens) and stats.loss_tokens == sum(tokens)
    assert stats.loss == pytest.approx(-sum(a * n for a, n in zip(chosen, tokens)) / 64 / 4, rel=1e-3)


def test_the_cli_trains_dr_grpo_for_a_step(tmp_path, capsys):
    from agents.cli import build_parser, main
    from agents.cli.train import config_from_args

    args = ["train", "--learner", "dr-grpo", "--model", "tiny", "--env.num-entities", "300", "--env.num-questions", "20",
            "--questions-per-step", "2", "--rollout.group-size", "2", "--rollout.max-turn-tokens", "12",
            "--rollout.max-response-tokens", "64", "--env.max-turns", "2", "--optim.micro-batch", "2", "--optim.lr", "1e-3",
            "--steps", "1", "--no-resume", "--out-dir", str(tmp_path / "run")]
    assert config_from_args(build_parser().parse_args(args)).learner == DrGRPOConfig()
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["learner"] == "dr-grpo" and result["steps"] == 1
    assert math.isfinite(result["last"]["loss/policy"]) and result["last"]["loss/tokens"] > 0
    # --help lists the learner and its defaults (read from each flag's help: the printed text wraps at hyphens).
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    flags = {action.dest: action.help for action in train._actions}
    assert "dr-grpo: GRPO without its biases" in flags["learner"] and "dr-grpo" in train.format_help()
    assert "dr-grpo none" in flags["learner.scale"] and "dr-grpo seq-mean-token-sum-norm" in flags["learner.aggregation"]
